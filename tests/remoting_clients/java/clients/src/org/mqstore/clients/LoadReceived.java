package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * What the load scenario's push consumer received: each corpus index's copies, the groups
 * they came from, and bodies that differ from the corpus.  Thread-safe.
 */
final class LoadReceived {
    private static final int SAMPLES_MAX = 20;

    private final Corpus corpus;
    private final BitSet seen = new BitSet();
    private final Map<String, Integer> byBroker = new TreeMap<>();
    private final List<String> mismatchSamples = new ArrayList<>();
    private int copies;
    private int duplicates;
    private int mismatches;
    private int foreign;

    LoadReceived(Corpus corpus) {
        this.corpus = corpus;
    }

    synchronized void add(List<MessageExt> messages, String broker) {
        for (MessageExt message : messages) {
            copies++;
            byBroker.merge(broker, 1, Integer::sum);
            String property = message.getUserProperty(Corpus.INDEX_PROPERTY);
            int index;
            try {
                index = Integer.parseInt(property == null ? "" : property);
            } catch (NumberFormatException notOurs) {
                foreign++;
                continue;
            }
            if (seen.get(index)) {
                duplicates++;
            }
            seen.set(index);
            if (!Arrays.equals(corpus.body(index), message.getBody())) {
                mismatches++;
                if (mismatchSamples.size() < SAMPLES_MAX) {
                    mismatchSamples.add("message " + index + ": body differs ("
                        + message.getBody().length + " bytes)");
                }
            }
        }
    }

    synchronized int distinct() {
        return seen.cardinality();
    }

    synchronized boolean hasAll(BitSet acked) {
        BitSet missing = (BitSet) acked.clone();
        missing.andNot(seen);
        return missing.isEmpty();
    }

    synchronized void report(BitSet acked, BitSet otherStatus, Map<String, Object> out) {
        BitSet missing = (BitSet) acked.clone();
        missing.andNot(seen);
        BitSet otherMissing = (BitSet) otherStatus.clone();
        otherMissing.andNot(seen);
        BitSet unacked = (BitSet) seen.clone();
        unacked.andNot(acked);
        unacked.andNot(otherStatus);
        List<Integer> samples = new ArrayList<>();
        for (int i = missing.nextSetBit(0); i >= 0 && samples.size() < SAMPLES_MAX;
             i = missing.nextSetBit(i + 1)) {
            samples.add(i);
        }
        out.put("received", seen.cardinality());
        out.put("receivedCopies", copies);
        out.put("receivedByBroker", new TreeMap<>(byBroker));
        out.put("missingAcked", missing.cardinality());
        out.put("missingSamples", samples);
        out.put("missingOtherStatus", otherMissing.cardinality());
        out.put("receivedNotAnswered", unacked.cardinality());
        out.put("duplicates", duplicates);
        out.put("foreign", foreign);
        out.put("mismatches", mismatches);
        out.put("mismatchSamples", new ArrayList<>(mismatchSamples));
    }
}
