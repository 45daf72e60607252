package manifold.debezium;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import io.debezium.engine.spi.OffsetCommitPolicy;

/**
 * Debezium's embedded engine reading a server (manifold's MySQL port) with its MariaDB or
 * MySQL connector, printing each change event on stdout as one JSON line:
 * {@code {"recv_us":N,"key":{...},"value":{...}}} ({@code recv_us}: microseconds since the
 * epoch when the engine handed the event over; key and value as Debezium's JSON converter
 * writes them, without schemas). When the engine stops it prints
 * {@code {"engine":"stopped","success":B,"message":"..."}}.
 *
 * <p>Arguments: {@code key=value} pairs, each a Debezium connector property (e.g.
 * {@code database.port=6033}), with two of the harness's own: {@code connector=mariadb|mysql}
 * and {@code dir=DIR} (the offsets and schema history files). Offsets are committed after
 * every batch; the engine runs until stdin closes, then stops cleanly (offsets flushed), so
 * a run started again on the same directory resumes where this one stopped.
 */
public final class Main {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("name", "manifold-check");
        props.setProperty("topic.prefix", "mf");
        props.setProperty("database.server.id", "6100");
        props.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        props.setProperty("offset.flush.interval.ms", "0");
        props.setProperty("schema.history.internal", "io.debezium.storage.file.history.FileSchemaHistory");
        props.setProperty("include.schema.changes", "false");
        props.setProperty("tombstones.on.delete", "false");
        props.setProperty("converter.schemas.enable", "false");
        props.setProperty("key.converter.schemas.enable", "false");
        props.setProperty("value.converter.schemas.enable", "false");
        String connector = "mariadb";
        String dir = ".";
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                System.err.println("argument not key=value: " + arg);
                System.exit(2);
            }
            String key = arg.substring(0, eq);
            String value = arg.substring(eq + 1);
            switch (key) {
                case "connector" -> connector = value;
                case "dir" -> dir = value;
                default -> props.setProperty(key, value);
            }
        }
        props.setProperty("connector.class", switch (connector) {
            case "mariadb" -> "io.debezium.connector.mariadb.MariaDbConnector";
            case "mysql" -> "io.debezium.connector.mysql.MySqlConnector";
            default -> {
                System.err.println("connector must be mariadb or mysql: " + connector);
                System.exit(2);
                yield "";
            }
        });
        props.setProperty("offset.storage.file.filename", dir + "/offsets.dat");
        props.setProperty("schema.history.internal.file.filename", dir + "/schema-history.dat");

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(props)
                .using(OffsetCommitPolicy.always())
                .using((success, message, error) -> {
                    synchronized (OUT) {
                        OUT.println("{\"engine\":\"stopped\",\"success\":" + success + ",\"message\":"
                                + quote(message + (error == null ? "" : ": " + error)) + "}");
                        OUT.flush();
                    }
                })
                .notifying(Main::handleBatch)
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        waitForEndOfInput(System.in);
        engine.close();
        executor.shutdown();
        executor.awaitTermination(60, TimeUnit.SECONDS);
    }

    private static void handleBatch(List<ChangeEvent<String, String>> records,
                                    DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer)
            throws InterruptedException {
        StringBuilder line = new StringBuilder(256);
        synchronized (OUT) {
            for (ChangeEvent<String, String> r : records) {
                long now = ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
                if (r.value() != null) {
                    line.setLength(0);
                    line.append("{\"recv_us\":").append(now)
                            .append(",\"key\":").append(r.key() == null ? "null" : r.key())
                            .append(",\"value\":").append(r.value()).append('}');
                    OUT.println(line);
                }
                committer.markProcessed(r);
            }
            OUT.flush();
        }
        committer.markBatchFinished();
    }

    private static void waitForEndOfInput(InputStream in) {
        byte[] buf = new byte[256];
        try {
            while (in.read(buf) >= 0) {
                // Only the end matters.
            }
        }
        catch (IOException e) {
            // Gone: stop as at the end.
        }
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
