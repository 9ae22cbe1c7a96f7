package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Sends the corpus in one of the producer's forms: sync, async, oneway, batch or through a
 * MessageQueueSelector.  Returns what each send reported; a send that fails or does not say
 * SEND_OK is recorded on the checker as a mismatch, never retried.
 */
final class Produce {
    static final String[] MODES = {"sync", "async", "oneway", "batch", "selector"};
    private static final long ASYNC_WAIT_S = 60;

    /** Queue {@code arg % n}: the selector the oneway and selector forms (and orderly) use. */
    static final MessageQueueSelector BY_ARGUMENT = (queues, message, arg) ->
        queues.get(((Integer) arg) % queues.size());

    private Produce() {
    }

    static List<Sent> run(DefaultMQProducer producer, Corpus corpus, String mode, int count,
                          int batchSize, Checker checker) throws Exception {
        switch (mode) {
            case "sync":
            case "selector":
                return sync(producer, corpus, count, mode.equals("selector"), checker);
            case "async":
                return async(producer, corpus, count, checker);
            case "oneway":
                return oneway(producer, corpus, count);
            case "batch":
                return batch(producer, corpus, count, batchSize, checker);
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    static Sent sent(int index, Message message, SendResult result) {
        return new Sent(index, message, MessageClientIDSetter.getUniqID(message),
            result.getOffsetMsgId(), result.getMessageQueue().getQueueId(),
            result.getQueueOffset());
    }

    private static void checkStatus(int index, SendResult result, Checker checker) {
        if (result.getSendStatus() != SendStatus.SEND_OK) {
            checker.mismatch("send " + index + ": status " + result.getSendStatus());
        }
    }

    private static List<Sent> sync(DefaultMQProducer producer, Corpus corpus, int count,
                                   boolean select, Checker checker) throws Exception {
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message message = corpus.message(i);
            SendResult result = select ? producer.send(message, BY_ARGUMENT, i)
                : producer.send(message);
            checkStatus(i, result, checker);
            if (select) {
                int queues = producer.fetchPublishMessageQueues(corpus.topic).size();
                if (result.getMessageQueue().getQueueId() != i % queues) {
                    checker.mismatch("send " + i + ": selector chose queue " + (i % queues)
                        + ", result says " + result.getMessageQueue());
                }
            }
            sent.add(sent(i, message, result));
        }
        return sent;
    }

    private static List<Sent> async(DefaultMQProducer producer, Corpus corpus, int count,
                                    Checker checker) throws Exception {
        List<Sent> sent = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch done = new CountDownLatch(count);
        for (int i = 0; i < count; i++) {
            final int index = i;
            final Message message = corpus.message(i);
            producer.send(message, new SendCallback() {
                @Override
                public void onSuccess(SendResult result) {
                    checkStatus(index, result, checker);
                    sent.add(sent(index, message, result));
                    done.countDown();
                }

                @Override
                public void onException(Throwable error) {
                    checker.mismatch("async send " + index + " failed: " + error);
                    done.countDown();
                }
            });
        }
        if (!done.await(ASYNC_WAIT_S, TimeUnit.SECONDS)) {
            checker.mismatch(done.getCount() + " async sends never called back");
        }
        return new ArrayList<>(sent);
    }

    /** Oneway sends go through the selector, so the queue each message must land in is known. */
    private static List<Sent> oneway(DefaultMQProducer producer, Corpus corpus, int count)
        throws Exception {
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message message = corpus.message(i);
            AtomicReference<MessageQueue> chosen = new AtomicReference<>();
            producer.sendOneway(message, (queues, msg, arg) -> {
                MessageQueue queue = BY_ARGUMENT.select(queues, msg, arg);
                chosen.set(queue);
                return queue;
            }, i);
            sent.add(new Sent(i, message, MessageClientIDSetter.getUniqID(message), null,
                chosen.get().getQueueId(), -1));
        }
        return sent;
    }

    /** A batch lands in one queue at consecutive offsets from the one the result reports. */
    private static List<Sent> batch(DefaultMQProducer producer, Corpus corpus, int count,
                                    int batchSize, Checker checker) throws Exception {
        List<Sent> sent = new ArrayList<>();
        for (int first = 0; first < count; first += batchSize) {
            List<Message> messages = new ArrayList<>();
            for (int i = first; i < Math.min(count, first + batchSize); i++) {
                messages.add(corpus.message(i));
            }
            SendResult result = producer.send(messages);
            checkStatus(first, result, checker);
            String[] offsetIds = result.getOffsetMsgId() == null ? new String[0]
                : result.getOffsetMsgId().split(",");
            for (int j = 0; j < messages.size(); j++) {
                Message message = messages.get(j);
                sent.add(new Sent(first + j, message, MessageClientIDSetter.getUniqID(message),
                    j < offsetIds.length ? offsetIds[j] : null,
                    result.getMessageQueue().getQueueId(), result.getQueueOffset() + j));
            }
        }
        return sent;
    }
}
