package org.mqstore.clients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code check-selftest}: feeds the Checker messages spoiled one field at a time, with no server,
 * and reports each verdict, so the tests can see that every kind of difference is caught (a
 * checker that let a changed body through would make every scenario meaningless).
 */
final class SelfTest {
    private static final int QUEUE_ID = 1;
    private static final long QUEUE_OFFSET = 7;

    private SelfTest() {
    }

    static Map<String, Object> run() {
        Map<String, Object> cases = new LinkedHashMap<>();
        cases.put("exact", spoiled(received -> { }));
        cases.put("body", spoiled(received -> received.getBody()[3] ^= 1));
        cases.put("tags", spoiled(received -> received.setTags("TagZ")));
        cases.put("keys", spoiled(received -> received.setKeys("another-key")));
        cases.put("propertyChanged", spoiled(received -> received.putUserProperty("color", "x")));
        cases.put("propertyAdded", spoiled(received -> received.putUserProperty("extra", "1")));
        cases.put("propertyDropped", spoiled(received ->
            MessageAccessor.clearProperty(received, "note")));
        cases.put("msgId", spoiled(received ->
            MessageAccessor.putProperty(received,
                MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "0000")));
        cases.put("queueId", spoiled(received -> received.setQueueId(QUEUE_ID + 1)));
        cases.put("queueOffset", spoiled(received -> received.setQueueOffset(QUEUE_OFFSET + 1)));
        cases.put("duplicate", counted(1, 2, 0));
        cases.put("missing", counted(2, 1, 0));
        cases.put("unexpected", counted(1, 1, 1));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("cases", cases);
        return out;
    }

    private static Sent sent(Corpus corpus, int index) {
        Message message = corpus.message(index);
        MessageClientIDSetter.setUniqID(message);
        return new Sent(index, message, MessageClientIDSetter.getUniqID(message), null, QUEUE_ID,
            QUEUE_OFFSET + index);
    }

    /** What a broker would hand back for {@code sent}, unchanged. */
    private static MessageExt received(Sent sent) {
        MessageExt received = new MessageExt();
        received.setTopic(sent.message.getTopic());
        received.setBody(sent.message.getBody().clone());
        MessageAccessor.setProperties(received, new HashMap<>(sent.message.getProperties()));
        received.setQueueId(sent.queueId);
        received.setQueueOffset(sent.queueOffset);
        return received;
    }

    private static Map<String, Object> spoiled(Consumer<MessageExt> spoil) {
        Checker checker = new Checker();
        Sent sent = sent(new Corpus("selftest", 64), 0);
        checker.expect(sent);
        MessageExt received = received(sent);
        spoil.accept(received);
        checker.receive(received);
        Map<String, Object> verdict = new LinkedHashMap<>();
        checker.report(verdict);
        return verdict;
    }

    /** Expects {@code expected} messages, delivers the first {@code deliveries} times, then
     * {@code strangers} messages that were never expected. */
    private static Map<String, Object> counted(int expected, int deliveries, int strangers) {
        Checker checker = new Checker();
        Corpus corpus = new Corpus("selftest", 64);
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < expected; i++) {
            sent.add(sent(corpus, i));
            checker.expect(sent.get(i));
        }
        for (int i = 0; i < deliveries; i++) {
            checker.receive(received(sent.get(0)));
        }
        for (int i = 0; i < strangers; i++) {
            checker.receive(received(sent(corpus, 100 + i)));
        }
        Map<String, Object> verdict = new LinkedHashMap<>();
        checker.report(verdict);
        return verdict;
    }
}
