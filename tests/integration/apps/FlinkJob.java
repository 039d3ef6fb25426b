// A Flink DataStream job as the field writes them, run in a local MiniCluster: a KafkaSource (its own
// uid), a keyed running count per partition (ValueState, uid "count"), records printed as JSON lines.
//
// java <opens> -cp FLINK_JARS:CLASSES FlinkJob CLIENT_PROPERTIES TOPIC SOURCE_UID GROUP SAVEPOINT_DIR [START]
//
// START is the file cutover's flink reader writes at a move (cutover readers translate): the savepoint
// to restore, the source uid to use and each partition's next offset. The job restores every operator's
// state but the source's (a new uid: its state is left unclaimed) and starts its new source at exactly
// those offsets with OffsetResetStrategy.NONE (a partition missing or out of range fails the job). Without
// START it starts from the earliest offsets.
//
// On stdout: {"event":"running"}, one line per record {"topic","partition","offset","value","n"} (n: the
// partition's running count, kept in state across savepoints), and {"event":"savepoint","path":...} when
// its stdin says "stop" (or ends): it stops with a savepoint in SAVEPOINT_DIR, then exits.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;

public class FlinkJob {
    static final ObjectMapper JSON = new ObjectMapper();

    /** Each record as {"topic","partition","offset","value"}. */
    public static class Records implements KafkaRecordDeserializationSchema<String> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<String> out) {
            ObjectNode row = JSON.createObjectNode();
            row.put("topic", record.topic());
            row.put("partition", record.partition());
            row.put("offset", record.offset());
            row.put("value", new String(record.value(), StandardCharsets.UTF_8));
            out.collect(row.toString());
        }

        @Override
        public TypeInformation<String> getProducedType() {
            return Types.STRING;
        }
    }

    /** The partition's running count, in keyed state: it must survive every move. */
    public static class Count extends RichMapFunction<String, String> {
        private transient ValueState<Long> seen;

        @Override
        public void open(OpenContext context) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
        }

        @Override
        public String map(String line) throws Exception {
            long n = (seen.value() == null ? 0L : seen.value()) + 1;
            seen.update(n);
            ObjectNode row = (ObjectNode) JSON.readTree(line);
            row.put("n", n);
            return row.toString();
        }
    }

    public static void main(String[] args) throws Exception {
        Properties client = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            client.load(in);
        }
        String topic = args[1], uid = args[2], group = args[3], savepoints = args[4];
        Configuration conf = new Configuration();
        OffsetsInitializer start = OffsetsInitializer.earliest();
        if (args.length > 5) {
            JsonNode handoff = JSON.readTree(new java.io.File(args[5]));
            uid = handoff.get("source_uid").asText();
            conf.set(StateRecoveryOptions.SAVEPOINT_PATH, handoff.get("savepoint").asText());
            conf.set(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, true);
            Map<TopicPartition, Long> offsets = new HashMap<>();
            for (JsonNode p : handoff.get("offsets")) {
                offsets.put(new TopicPartition(p.get("topic").asText(), p.get("partition").asInt()),
                        p.get("offset").asLong());
            }
            start = OffsetsInitializer.offsets(offsets, OffsetResetStrategy.NONE);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setProperties(client)
                .setTopics(topic)
                .setGroupId(group)
                .setProperty("isolation.level", "read_committed")  // Flink's default reads aborted records too
                .setStartingOffsets(start)
                .setDeserializer(new Records())
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka").uid(uid)
                .keyBy(line -> JSON.readTree(line).get("partition").asInt())
                .map(new Count()).uid("count")
                .print().uid("print");
        JobClient job = env.executeAsync("flink-job");
        System.out.println("{\"event\":\"running\",\"uid\":\"" + uid + "\"}");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        do {
            line = stdin.readLine();
        } while (line != null && !line.equals("stop"));
        String path = job.stopWithSavepoint(false, new java.io.File(savepoints).toURI().toString(),
                SavepointFormatType.CANONICAL).get();
        System.out.println("{\"event\":\"savepoint\",\"path\":\"" + path + "\"}");
        System.exit(0);
    }
}
