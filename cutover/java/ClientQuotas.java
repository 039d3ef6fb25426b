// Client quotas through Kafka's Java Admin API (librdkafka, and so confluent-kafka, has no
// DescribeClientQuotas or AlterClientQuotas). Run by cutover/rights/quotas.py (through
// kafka/java_admin.py and cutover.jvm.program, with Cli.java), with Kafka's client jars on the class path:
//
//   java -cp JARS ClientQuotas.java CONFIG describe
//       prints every quota of the cluster, one JSON object per line:
//       {"entity": {"user": "alice", "client-id": null}, "quotas": {"producer_byte_rate": 1024.0}}
//       (a null name is that entity type's default)
//   java -cp JARS ClientQuotas.java CONFIG alter OP...
//       OP is ENTITY;KEY=VALUE (set) or ENTITY;KEY= (remove); ENTITY is TYPE=NAME joined by '&',
//       NAME URL-encoded, a TYPE alone for its default. Prints "ok".
//
// CONFIG is a Java client properties file. Errors go to stderr, exit code 1.
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;

public class ClientQuotas {
    public static void main(String[] args) throws Exception {
        try (Admin admin = Admin.create(Cli.properties(args[0]))) {
            if (args[1].equals("describe")) {
                describe(admin);
            } else {
                alter(admin, args);
            }
        } catch (java.util.concurrent.ExecutionException e) {
            Cli.fail("", Cli.cause(e), 1);
        }
    }

    static void describe(Admin admin) throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> all =
            admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
            StringBuilder out = new StringBuilder("{\"entity\": {");
            String sep = "";
            for (Map.Entry<String, String> part : new TreeMap<>(e.getKey().entries()).entrySet()) {
                out.append(sep).append(Cli.quote(part.getKey())).append(": ")
                   .append(part.getValue() == null ? "null" : Cli.quote(part.getValue()));
                sep = ", ";
            }
            out.append("}, \"quotas\": {");
            sep = "";
            for (Map.Entry<String, Double> q : new TreeMap<>(e.getValue()).entrySet()) {
                out.append(sep).append(Cli.quote(q.getKey())).append(": ").append(q.getValue());
                sep = ", ";
            }
            System.out.println(out.append("}}"));
        }
    }

    static void alter(Admin admin, String[] args) throws Exception {
        Map<ClientQuotaEntity, List<ClientQuotaAlteration.Op>> ops = new LinkedHashMap<>();
        for (int i = 2; i < args.length; i++) {
            String[] entityAndOp = args[i].split(";", 2);
            Map<String, String> entries = new LinkedHashMap<>();
            for (String part : entityAndOp[0].split("&")) {
                String[] kv = part.split("=", 2);
                entries.put(kv[0], kv.length == 1 ? null : URLDecoder.decode(kv[1], StandardCharsets.UTF_8));
            }
            String[] op = entityAndOp[1].split("=", 2);
            Double value = op[1].isEmpty() ? null : Double.valueOf(op[1]);
            ops.computeIfAbsent(new ClientQuotaEntity(entries), k -> new ArrayList<>())
               .add(new ClientQuotaAlteration.Op(op[0], value));
        }
        List<ClientQuotaAlteration> alterations = new ArrayList<>();
        ops.forEach((entity, list) -> alterations.add(new ClientQuotaAlteration(entity, list)));
        admin.alterClientQuotas(alterations).all().get();
        System.out.println("ok");
    }
}
