"""Rights move with the workload: the ACL authorizer model (and, to come, the inventory, diff and apply)."""
