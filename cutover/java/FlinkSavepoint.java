// The Kafka positions a Flink savepoint holds for one KafkaSource: each split's (topic, partition,
// next offset to read), read with Flink's own State Processor API, one JSON line per split on stdout.
//
// Run by cutover (readers/flink.py, through cutover.jvm.program, with Cli.java) with Flink's jars on the
// class path: java -cp JARS FlinkSavepoint SAVEPOINT_PATH SOURCE_UID
//
// A SourceOperator keeps its splits as the operator list state "SourceReaderState", each element the
// split serializer's bytes in SimpleVersionedSerialization's envelope; the KafkaSource's serializer
// gives KafkaPartitionSplit (startingOffset is the next offset: the last record emitted + 1, or a
// marker below 0 for a split that had not read yet).
import java.util.List;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplitSerializer;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class FlinkSavepoint {
    public static void main(String[] args) throws Exception {
        String path = args[0];
        String uid = args[1];
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
        env.setParallelism(1);
        SavepointReader savepoint = SavepointReader.read(env, path, new HashMapStateBackend());
        List<byte[]> states;
        try {
            states = savepoint.readListState(OperatorIdentifier.forUid(uid), "SourceReaderState",
                    PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO).executeAndCollect(1_000_000);
        } catch (Exception e) {
            Throwable t = e;
            while (t.getCause() != null) {
                t = t.getCause();
            }
            Cli.fail("cutover-flink: ", t, 3);
            return;
        }
        KafkaPartitionSplitSerializer serializer = new KafkaPartitionSplitSerializer();
        for (byte[] bytes : states) {
            KafkaPartitionSplit split = SimpleVersionedSerialization.readVersionAndDeSerialize(serializer, bytes);
            System.out.println("{\"topic\":" + Cli.quote(split.getTopic())
                    + ",\"partition\":" + split.getPartition() + ",\"offset\":" + split.getStartingOffset()
                    + ",\"stopping\":" + split.getStoppingOffset().orElse(KafkaPartitionSplit.NO_STOPPING_OFFSET)
                    + "}");
        }
    }
}
