// A Kafka Streams word count, exactly-once v2, its counts in a persistent (RocksDB) store: the real
// application the readers tests move between clusters. Run in source-file mode:
//   java -cp <kafka-streams jars> WordCount.java CLIENT_PROPERTIES APPLICATION_ID STATE_DIR INPUT OUTPUT
// It prints one JSON event per line on stdout (state changes, each store restore with the records it
// restored, "closed" after a clean close) and closes cleanly when its stdin ends.
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

public class WordCount {
    static synchronized void say(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (Reader r = Files.newBufferedReader(Path.of(args[0]))) {
            props.load(r);
        }
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");  // every update to the changelog
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[3])
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .groupBy((key, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                say("{\"event\":\"restore-start\",\"topic\":\"" + tp.topic() + "\",\"partition\":" + tp.partition()
                    + ",\"start\":" + start + ",\"end\":" + end + "}");
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) {
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long restored) {
                say("{\"event\":\"restored\",\"topic\":\"" + tp.topic() + "\",\"partition\":" + tp.partition()
                    + ",\"records\":" + restored + "}");
            }
        });
        streams.setStateListener((now, before) -> say("{\"event\":\"state\",\"state\":\"" + now + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        while (System.in.read() != -1) {
            // runs until its stdin ends
        }
        streams.close(Duration.ofSeconds(60));
        say("{\"event\":\"closed\"}");
    }
}
