// The producers a cluster knows, through Kafka's Java Admin API (librdkafka, and so confluent-kafka,
// has neither ListTransactions nor DescribeProducers). Run by cutover/kafka/producers.py (through
// kafka/java_admin.py and cutover.jvm.program, with Cli.java), with Kafka's client jars on the class path:
//
//   java -cp JARS Producers.java CONFIG TOPIC:PARTITION...
//       prints one JSON object per line:
//       {"transaction": "app-1", "producer_id": 7001, "state": "Ongoing"}       (ListTransactions)
//       {"topic": "orders", "partition": 0, "producer_id": 7001, "epoch": 0, "last_sequence": 41,
//        "last_timestamp": 1795777746336, "transaction_start": 120}              (DescribeProducers; -1: none open)
//
// CONFIG is a Java client properties file. Errors go to stderr, exit code 1.
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.common.TopicPartition;

public class Producers {
    public static void main(String[] args) throws Exception {
        List<TopicPartition> partitions = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            int at = args[i].lastIndexOf(':');
            partitions.add(new TopicPartition(args[i].substring(0, at), Integer.parseInt(args[i].substring(at + 1))));
        }
        try (Admin admin = Admin.create(Cli.properties(args[0]))) {
            for (TransactionListing t : admin.listTransactions().all().get()) {
                System.out.println("{\"transaction\": " + Cli.quote(t.transactionalId()) + ", \"producer_id\": "
                    + t.producerId() + ", \"state\": " + Cli.quote(t.state().toString()) + "}");
            }
            if (!partitions.isEmpty()) {
                Map<TopicPartition, PartitionProducerState> found = admin.describeProducers(partitions).all().get();
                for (Map.Entry<TopicPartition, PartitionProducerState> e : found.entrySet()) {
                    for (ProducerState p : e.getValue().activeProducers()) {
                        System.out.println("{\"topic\": " + Cli.quote(e.getKey().topic()) + ", \"partition\": "
                            + e.getKey().partition() + ", \"producer_id\": " + p.producerId() + ", \"epoch\": "
                            + p.producerEpoch() + ", \"last_sequence\": " + p.lastSequence()
                            + ", \"last_timestamp\": " + p.lastTimestamp() + ", \"transaction_start\": "
                            + p.currentTransactionStartOffset().orElse(-1) + "}");
                    }
                }
            }
        } catch (java.util.concurrent.ExecutionException e) {
            Cli.fail("", Cli.cause(e), 1);
        }
    }
}
