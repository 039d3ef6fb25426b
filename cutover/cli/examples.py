"""An example for every command's help, kept as data in one place (a command whose docstring
has its own "Example:" block keeps that one). `attach` appends them when the CLI is built;
tests/unit/test_cli.py checks that every command has one and that help fits 80 columns."""

from __future__ import annotations

import inspect

import click

EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("cutover demo", "cutover demo --catalog rest --format avro -o json"),
    "drill": ("cutover drill show full-migration",
              "cutover drill run full-migration --plan plan.yaml --auto"),
    "drill run": ("cutover drill run full-migration --plan plan.yaml --auto",
                  "cutover drill run mirror-crash-and-resume --plan plan.yaml \\",
                  "    --report reports/ --keep-going"),
    "drill show": ("cutover drill show full-migration",
                   "cutover drill show runbooks/replay.yaml --param records=500"),
    "init": ("cutover init --plan plan.yaml --old-bootstrap old-1:9092 \\",
             "    --new-bootstrap new-1:9092 --topics 'orders.*' --groups 'billing.*' \\",
             "    --pair orders=legacy.orders:cutover.orders \\",
             "    --catalog-uri http://rest:8181",
             "cutover init   # at a terminal: asks for what is missing"),
    "jars": ("cutover jars fetch", "cutover jars fetch --with-lake --with-connect"),
    "jars fetch": ("cutover jars fetch", "cutover jars fetch --with-sandbox --with-registry"),
    "local": ("cutover local up", "cutover local status -o json", "cutover local down"),
    "local down": ("cutover local down", "cutover local down --purge   # also delete the data"),
    "local fetch": ("cutover local fetch --with-connect --with-registry",),
    "local start": ("cutover local start old", "cutover local start new --broker 2",
                    "cutover local start connect --cluster new"),
    "local status": ("cutover local status", "cutover local status -o json"),
    "local stop": ("cutover local stop old --kill   # a crash, not a clean stop",
                   "cutover local stop registry --cluster new"),
    "local up": ("cutover local up",
                 "cutover local up --security old=sasl_ssl --security new=mtls \\",
                 "    --brokers old=3 --kafka-version old=3.9.1 --registry"),
    "mirror": ("cutover mirror --plan plan.yaml --until-caught-up",
               "cutover mirror --plan plan.yaml --shard 0/3 --metrics-port 9400 \\",
               "    --ready-file /run/cutover/ready"),
    "mirror status": ("cutover mirror status --plan plan.yaml",
                      "cutover mirror status --plan plan.yaml --reverse -o json"),
    "offsets sync": ("cutover offsets sync --plan plan.yaml",
                     "cutover offsets sync --plan plan.yaml --reverse -o json"),
    "offsets": ("cutover offsets translate --plan plan.yaml --group billing",
                "cutover offsets sync --plan plan.yaml"),
    "readers": ("cutover readers find --plan plan.yaml",
                "cutover readers translate --plan plan.yaml --reader orders-query --dry-run"),
    "readers find": ("cutover readers find --plan plan.yaml", "cutover readers find --plan plan.yaml -o json"),
    "readers translate": ("cutover readers translate --plan plan.yaml --reader orders-query --dry-run",
                          "cutover readers translate --plan plan.yaml --reader orders-query --execute",
                          "cutover readers translate --plan plan.yaml --reader orders-query \\",
                          "    --starting-offsets -o json"),
    "offsets translate": ("cutover offsets translate --plan plan.yaml --group billing",
                          "cutover offsets translate --plan plan.yaml --group billing \\",
                          "    --reverse -o json"),
    "cancel": ("cutover cancel --plan plan.yaml --dry-run",
               "cutover cancel --plan plan.yaml --execute --delete-mirrored-topics"),
    "complete": ("cutover complete --plan plan.yaml --dry-run",
                 "cutover complete --plan plan.yaml --execute --keep-state"),
    "plan": ("cutover plan check --plan plan.yaml",
             "cutover plan schema > plan.schema.json"),
    "plan check": ("cutover plan check --plan plan.yaml",
                   "cutover plan check --plan plan.yaml --offline -o json"),
    "promote": ("cutover promote --plan plan.yaml --dry-run",
                "cutover promote --plan plan.yaml --execute -o json"),
    "registry": ("cutover registry sync --plan plan.yaml --dry-run",
                 "cutover registry audit --plan plan.yaml"),
    "rights": ("cutover rights plan --plan plan.yaml",
               "cutover rights apply --plan plan.yaml --execute",
               "cutover rights audit --plan plan.yaml"),
    "rollback": ("cutover rollback --plan plan.yaml --dry-run",
                 "cutover rollback --plan plan.yaml --execute"),
    "shadow": ("cutover shadow --plan plan.yaml --follow",
               "cutover shadow --plan plan.yaml --table orders --until-caught-up"),
    "shadow status": ("cutover shadow status --plan plan.yaml",
                      "cutover shadow status --plan plan.yaml --table orders -o json"),
    "status": ("cutover status --plan plan.yaml", "cutover status --plan plan.yaml -o json"),
    "assess": ("cutover assess --plan plan.yaml",
               "cutover assess --plan plan.yaml --report reports/assess -o json"),
    "exporter": ("cutover exporter --plan plan.yaml --port 9420",
                 "cutover exporter --plan plan.yaml --port 9420 --interval 15s"),
    "verify": ("cutover verify --plan plan.yaml",
               "cutover verify --plan plan.yaml --table orders --report reports/"),
}


def attach(group: click.Group, prefix: str = "") -> None:
    """Append each command's example to its help (unless its docstring has one)."""
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        lines = EXAMPLES.get(path)
        if lines and "Example" not in (command.help or ""):
            text = inspect.cleandoc(command.help or "")  # click cleans the whole text: ours must not skew it
            command.help = text + "\n\n\b\nExample:\n" + "\n".join(f"  {x}" for x in lines)
        if isinstance(command, click.Group):
            attach(command, f"{path} ")
