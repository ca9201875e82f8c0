package streamjoin.flinkdiff;

import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.lang.reflect.Field;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionVertex;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

/**
 * One table of a test case as a Flink source that emits its rows at their turn in the case's arrival order.
 *
 * <p>No source emits before {@link #start} opens its run: the runner calls it once every task of the job runs
 * ({@link #allTasksRunning}), because rows emitted while a downstream task still opens its operators pile up
 * in its input channels and are then read in no fixed order across inputs.
 *
 * <p>Every table of a case is one such source; they share a turn counter (keyed by {@code runId}, in this
 * JVM: the local MiniCluster runs in the gateway's JVM). A source waits until the counter equals the global
 * arrival index of its next row, emits the row (with its rowtime as the record timestamp) and, for a table
 * with a rowtime, the watermark {@code max rowtime seen - delay} when it advanced, then waits
 * {@code paceMillis} so that the row and its consequences reach every operator before the next row of any
 * table is emitted (two-input operators read their inputs in no fixed order), and passes the turn. A source
 * finishes only when every row of every table was emitted, so the end-of-input watermark (+inf, emitted by
 * Flink when a source finishes) comes after the last row, as in tests/data/flink-cases/README.md.
 */
public class ArrivalOrderSource implements SourceFunction<Row> {
    private static final Map<String, AtomicInteger> TURNS = new ConcurrentHashMap<>();
    private static final Set<String> STARTED = ConcurrentHashMap.newKeySet();

    private final String runId;
    private final List<Row> rows;
    private final long[] arrivals;       // global arrival index of each row
    private final long[] rowtimes;       // epoch ms of each row's rowtime (ignored without a rowtime)
    private final boolean hasRowtime;
    private final long delayMillis;
    private final int total;             // arrivals over all tables
    private final long paceMillis;
    private volatile boolean running = true;

    public ArrivalOrderSource(String runId, List<Row> rows, long[] arrivals, long[] rowtimes, boolean hasRowtime,
                              long delayMillis, int total, long paceMillis) {
        this.runId = runId;
        this.rows = rows;
        this.arrivals = arrivals;
        this.rowtimes = rowtimes;
        this.hasRowtime = hasRowtime;
        this.delayMillis = delayMillis;
        this.total = total;
        this.paceMillis = paceMillis;
    }

    private void awaitTurn(AtomicInteger turn, long index) throws InterruptedException {
        while (running && turn.get() < index) {
            Thread.sleep(1);
        }
    }

    @Override
    public void run(SourceContext<Row> ctx) throws Exception {
        AtomicInteger turn = TURNS.computeIfAbsent(runId, k -> new AtomicInteger());
        while (running && !STARTED.contains(runId)) {
            Thread.sleep(1);
        }
        long maxSeen = Long.MIN_VALUE;
        long emitted = Long.MIN_VALUE;
        for (int i = 0; i < rows.size() && running; i++) {
            awaitTurn(turn, arrivals[i]);
            synchronized (ctx.getCheckpointLock()) {
                if (hasRowtime) {
                    ctx.collectWithTimestamp(rows.get(i), rowtimes[i]);
                    maxSeen = Math.max(maxSeen, rowtimes[i]);
                    if (maxSeen - delayMillis > emitted) {
                        emitted = maxSeen - delayMillis;
                        ctx.emitWatermark(new Watermark(emitted));
                    }
                } else {
                    ctx.collect(rows.get(i));
                }
            }
            Thread.sleep(paceMillis);
            turn.incrementAndGet();
        }
        awaitTurn(turn, total);
    }

    @Override
    public void cancel() {
        running = false;
    }

    /**
     * A row of a case as Flink's {@code fromChangelogStream} takes it: {@code values} as JSON gives them
     * (numbers, strings; timestamps as {@code YYYY-MM-DD HH:MM:SS[.fff]} UTC text, DECIMALs as text), converted
     * to the Java class of their SQL type root ({@code types[i]}: INT, BIGINT, TIMESTAMP, …).
     */
    public static Row row(String shortKind, Object[] values, String[] types) {
        Object[] converted = new Object[values.length];
        for (int i = 0; i < values.length; i++) {
            converted[i] = values[i] == null ? null : convert(values[i], types[i]);
        }
        for (RowKind kind : RowKind.values()) {
            if (kind.shortString().equals(shortKind)) {
                return Row.ofKind(kind, converted);
            }
        }
        throw new IllegalArgumentException("unknown RowKind " + shortKind);
    }

    private static Object convert(Object value, String type) {
        switch (type) {
            case "TINYINT": return ((Number) value).byteValue();
            case "SMALLINT": return ((Number) value).shortValue();
            case "INT": case "INTEGER": return ((Number) value).intValue();
            case "BIGINT": return ((Number) value).longValue();
            case "FLOAT": return ((Number) value).floatValue();
            case "DOUBLE": return ((Number) value).doubleValue();
            case "DECIMAL": return new BigDecimal(value.toString());
            case "DATE": return LocalDate.parse(value.toString());
            case "TIMESTAMP": return LocalDateTime.parse(value.toString().replace(' ', 'T'));
            case "TIMESTAMP_LTZ": return Instant.parse(value.toString().replace(' ', 'T') + "Z");
            default: return value;
        }
    }

    /** Let the sources of run {@code runId} emit. */
    public static void start(String runId) {
        STARTED.add(runId);
    }

    /** Forget a finished run's gate and turn counter. */
    public static void release(String runId) {
        STARTED.remove(runId);
        TURNS.remove(runId);
    }

    /**
     * Whether every task of the job of {@code client} (a local MiniCluster job) is RUNNING, i.e. has opened its
     * operators. Reads the job client's MiniCluster by reflection: the JobClient interface has only the job status,
     * which is RUNNING while tasks are still being deployed and initialised.
     */
    public static boolean allTasksRunning(JobClient client) throws Exception {
        MiniCluster cluster = null;
        for (Class<?> c = client.getClass(); c != null && cluster == null; c = c.getSuperclass()) {
            for (Field field : c.getDeclaredFields()) {
                if (MiniCluster.class.isAssignableFrom(field.getType())) {
                    field.setAccessible(true);
                    cluster = (MiniCluster) field.get(client);
                }
            }
        }
        if (cluster == null) {
            throw new IllegalStateException("not a MiniCluster job client: " + client.getClass());
        }
        for (AccessExecutionVertex vertex : cluster.getExecutionGraph(client.getJobID()).get().getAllExecutionVertices()) {
            if (vertex.getExecutionState() != ExecutionState.RUNNING) {
                return false;
            }
        }
        return true;
    }
}
