package org.mqstore.clients;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;

/**
 * What the load scenario's sends came to: the corpus indexes acknowledged (SEND_OK), the other
 * statuses, the failures (an exception after the client's retries; the first few kept with
 * the second of the load they started at), and each send's start and end, from which the
 * longest outage an application saw is measured.  Thread-safe.
 */
final class LoadSends {
    private static final int SAMPLES_MAX = 10;

    private final BitSet acked = new BitSet();
    /** Answered with another status (SLAVE_NOT_AVAILABLE, say): written, not replicated. */
    private final BitSet otherStatus = new BitSet();
    private final Map<String, Integer> otherStatuses = new TreeMap<>();
    private final Map<String, Integer> ackedByBroker = new TreeMap<>();
    private final List<String> failureSamples = new ArrayList<>();
    /** Failures by the whole second of the load their send started in. */
    private final Map<Long, Integer> failuresBySecond = new TreeMap<>();
    /** {start ns, end ns, 1 if acknowledged else 0} per send. */
    private final List<long[]> spans = new ArrayList<>();
    private final long originNs;
    private int ackedCount;
    private int failedCount;

    /** {@code originNs}: the load's start, from which a failure sample's time is given. */
    LoadSends(long originNs) {
        this.originNs = originNs;
    }

    synchronized void answered(int index, long startNs, SendResult result) {
        boolean ok = result.getSendStatus() == SendStatus.SEND_OK;
        spans.add(new long[] {startNs, System.nanoTime(), ok ? 1 : 0});
        if (ok) {
            acked.set(index);
            ackedCount++;
            ackedByBroker.merge(result.getMessageQueue().getBrokerName(), 1, Integer::sum);
        } else {
            otherStatus.set(index);
            otherStatuses.merge(result.getSendStatus().name(), 1, Integer::sum);
        }
    }

    synchronized void failed(long startNs, Exception error) {
        spans.add(new long[] {startNs, System.nanoTime(), 0});
        failedCount++;
        failuresBySecond.merge((startNs - originNs) / 1_000_000_000L, 1, Integer::sum);
        if (failureSamples.size() < SAMPLES_MAX) {
            Throwable cause = error.getCause();
            failureSamples.add(String.format("%.1f s: %s%s", (startNs - originNs) / 1e9, error,
                cause == null ? "" : " (last try: " + cause + ")"));
        }
    }

    synchronized BitSet acked() {
        return (BitSet) acked.clone();
    }

    synchronized BitSet otherStatus() {
        return (BitSet) otherStatus.clone();
    }

    synchronized int ackedCount() {
        return ackedCount;
    }

    synchronized Map<String, Integer> ackedByBroker() {
        return new TreeMap<>(ackedByBroker);
    }

    synchronized int failedCount() {
        return failedCount;
    }

    synchronized void report(Map<String, Object> out) {
        out.put("sent", spans.size());
        out.put("acked", ackedCount);
        out.put("ackedByBroker", new TreeMap<>(ackedByBroker));
        out.put("otherStatuses", new TreeMap<>(otherStatuses));
        out.put("failed", failedCount);
        out.put("failureSamples", new ArrayList<>(failureSamples));
        out.put("failuresBySecond", new TreeMap<>(failuresBySecond));
        long longestSendNs = 0;
        for (long[] span : spans) {
            longestSendNs = Math.max(longestSendNs, span[1] - span[0]);
        }
        out.put("longestSendMs", longestSendNs / 1e6);
        out.put("longestOutageMs", longestOutageNs() / 1e6);
    }

    /**
     * The longest time from the start of a send that was not acknowledged to the end of the
     * first acknowledged send started at or after it: how long an application that kept sending
     * went without an acknowledgement because of a failure.  0 when every send was acknowledged.
     */
    private long longestOutageNs() {
        List<long[]> byStart = new ArrayList<>(spans);
        byStart.sort(Comparator.comparingLong(span -> span[0]));
        long longest = 0;
        long firstAckEndAfter = Long.MAX_VALUE;
        for (int i = byStart.size() - 1; i >= 0; i--) {
            long[] span = byStart.get(i);
            if (span[2] == 1) {
                firstAckEndAfter = Math.min(firstAckEndAfter, span[1]);
            } else if (firstAckEndAfter != Long.MAX_VALUE) {
                longest = Math.max(longest, firstAckEndAfter - span[0]);
            } else {
                longest = Math.max(longest, span[1] - span[0]);
            }
        }
        return longest;
    }
}
