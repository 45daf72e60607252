package manifold.debezium;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import io.debezium.engine.spi.OffsetCommitPolicy;

/**
 * Debezium's embedded engines reading a server (manifold's MySQL port) with the MariaDB or
 * MySQL connector, several in one JVM (starting a JVM and loading Debezium costs seconds;
 * the tests start and stop engines many times). Commands, one per line on stdin:
 * <ul>
 * <li>{@code start NAME key=value...}: starts engine NAME; each pair is a Debezium connector
 * property (e.g. {@code database.port=6033}), with two of the harness's own:
 * {@code connector=mariadb|mysql} and {@code dir=DIR} (the offsets and schema history
 * files). Offsets are committed after every batch.</li>
 * <li>{@code stop NAME}: stops it cleanly (offsets flushed), so an engine started again on
 * the same directory resumes where this one stopped.</li>
 * </ul>
 * Each change event is printed on stdout as one JSON line:
 * {@code {"engine":"NAME","recv_us":N,"key":{...},"value":{...}}} ({@code recv_us}:
 * microseconds since the epoch when the engine handed the event over; key and value as
 * Debezium's JSON converter writes them, without schemas). When an engine stops it prints
 * {@code {"engine":"NAME","stopped":true,"success":B,"message":"..."}}. At the end of stdin
 * every engine is stopped and the program exits.
 *
 * <p>With arguments ({@code run.sh run KEY=VALUE...}, by hand), it starts one engine named
 * {@code main} with them and stops it at the end of stdin.
 */
public final class Main {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final Map<String, Running> ENGINES = new LinkedHashMap<>();

    private record Running(DebeziumEngine<ChangeEvent<String, String>> engine, ExecutorService executor) {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) {
            start("main", Arrays.asList(args));
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        try {
            while ((line = in.readLine()) != null) {
                List<String> words = Arrays.stream(line.trim().split("\\s+")).filter(w -> !w.isEmpty()).toList();
                if (words.size() >= 2 && words.get(0).equals("start")) {
                    start(words.get(1), words.subList(2, words.size()));
                }
                else if (words.size() == 2 && words.get(0).equals("stop")) {
                    stop(words.get(1));
                }
                else if (!words.isEmpty()) {
                    System.err.println("command not understood: " + line);
                }
            }
        }
        catch (IOException e) {
            // stdin gone: stop as at its end.
        }
        for (String name : List.copyOf(ENGINES.keySet())) {
            stop(name);
        }
        System.exit(0);
    }

    private static void start(String name, List<String> args) {
        if (ENGINES.containsKey(name)) {
            stopped(name, false, "an engine of this name runs already");
            return;
        }
        Properties props = new Properties();
        props.setProperty("name", "manifold-check-" + name);
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
                stopped(name, false, "argument not key=value: " + arg);
                return;
            }
            String key = arg.substring(0, eq);
            String value = arg.substring(eq + 1);
            switch (key) {
                case "connector" -> connector = value;
                case "dir" -> dir = value;
                default -> props.setProperty(key, value);
            }
        }
        String connectorClass = switch (connector) {
            case "mariadb" -> "io.debezium.connector.mariadb.MariaDbConnector";
            case "mysql" -> "io.debezium.connector.mysql.MySqlConnector";
            default -> null;
        };
        if (connectorClass == null) {
            stopped(name, false, "connector must be mariadb or mysql: " + connector);
            return;
        }
        props.setProperty("connector.class", connectorClass);
        props.setProperty("offset.storage.file.filename", dir + "/offsets.dat");
        props.setProperty("schema.history.internal.file.filename", dir + "/schema-history.dat");

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(props)
                .using(OffsetCommitPolicy.always())
                .using((success, message, error) -> stopped(name, success,
                        message + (error == null ? "" : ": " + error)))
                .notifying((records, committer) -> handleBatch(name, records, committer))
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        ENGINES.put(name, new Running(engine, executor));
    }

    private static void stop(String name) {
        Running r = ENGINES.remove(name);
        if (r == null) {
            return;
        }
        try {
            r.engine().close();
        }
        catch (IOException | IllegalStateException e) {
            // Stopped already (a failure): its completion callback said so.
        }
        r.executor().shutdown();
        try {
            r.executor().awaitTermination(60, TimeUnit.SECONDS);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void stopped(String name, boolean success, String message) {
        synchronized (OUT) {
            OUT.println("{\"engine\":" + quote(name) + ",\"stopped\":true,\"success\":" + success
                    + ",\"message\":" + quote(message) + "}");
            OUT.flush();
        }
    }

    private static void handleBatch(String name, List<ChangeEvent<String, String>> records,
                                    DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer)
            throws InterruptedException {
        StringBuilder line = new StringBuilder(256);
        String quotedName = quote(name);
        synchronized (OUT) {
            for (ChangeEvent<String, String> r : records) {
                long now = ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
                if (r.value() != null) {
                    line.setLength(0);
                    line.append("{\"engine\":").append(quotedName)
                            .append(",\"recv_us\":").append(now)
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
