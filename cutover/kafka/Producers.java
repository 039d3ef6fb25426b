// The producers a cluster knows, through Kafka's Java Admin API (librdkafka, and so confluent-kafka,
// has neither ListTransactions nor DescribeProducers). Run by cutover/kafka/producers.py in Java's
// single-file source mode (kafka/java_admin.py), with Kafka's client jars on the class path:
//
//   java -cp JARS Producers.java CONFIG TOPIC:PARTITION...
//       prints one JSON object per line:
//       {"transaction": "app-1", "producer_id": 7001, "state": "Ongoing"}       (ListTransactions)
//       {"topic": "orders", "partition": 0, "producer_id": 7001, "epoch": 0, "last_sequence": 41,
//        "last_timestamp": 1795777746336, "transaction_start": 120}              (DescribeProducers; -1: none open)
//
// CONFIG is a Java client properties file. Errors go to stderr, exit code 1.
import java.io.FileInputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.common.TopicPartition;

public class Producers {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        List<TopicPartition> partitions = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            int at = args[i].lastIndexOf(':');
            partitions.add(new TopicPartition(args[i].substring(0, at), Integer.parseInt(args[i].substring(at + 1))));
        }
        try (Admin admin = Admin.create(props)) {
            for (TransactionListing t : admin.listTransactions().all().get()) {
                System.out.println("{\"transaction\": " + quote(t.transactionalId()) + ", \"producer_id\": "
                    + t.producerId() + ", \"state\": " + quote(t.state().toString()) + "}");
            }
            if (!partitions.isEmpty()) {
                Map<TopicPartition, PartitionProducerState> found = admin.describeProducers(partitions).all().get();
                for (Map.Entry<TopicPartition, PartitionProducerState> e : found.entrySet()) {
                    for (ProducerState p : e.getValue().activeProducers()) {
                        System.out.println("{\"topic\": " + quote(e.getKey().topic()) + ", \"partition\": "
                            + e.getKey().partition() + ", \"producer_id\": " + p.producerId() + ", \"epoch\": "
                            + p.producerEpoch() + ", \"last_sequence\": " + p.lastSequence()
                            + ", \"last_timestamp\": " + p.lastTimestamp() + ", \"transaction_start\": "
                            + p.currentTransactionStartOffset().orElse(-1) + "}");
                    }
                }
            }
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            System.err.println(cause.getClass().getSimpleName() + ": " + cause.getMessage());
            System.exit(1);
        }
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
