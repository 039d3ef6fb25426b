# Shared by the sample hooks: the systemd units of your clients. Edit these lists (or set them in
# the environment cutover runs in). Every hook must be idempotent: a re-run of an interrupted
# step runs its hook again, and stopping a stopped unit or starting a started one does nothing.
PRODUCER_UNITS=${PRODUCER_UNITS:-"orders-producer.service payments-producer.service"}
CONSUMER_UNITS=${CONSUMER_UNITS:-"billing-consumer.service"}
# Where the clients read their bootstrap servers from (an EnvironmentFile= of their units).
CLIENT_ENV_FILE=${CLIENT_ENV_FILE:-/etc/kafka-clients/bootstrap.env}
SYSTEMCTL=${SYSTEMCTL:-systemctl}
