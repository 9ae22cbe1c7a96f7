// -mode delay: -count messages sent with Message.WithDelayTimeLevel(-level) reach a push
// consumer that is already reading the topic.  A warm-up message (not delayed) creates the
// topic and proves the consumer reads before the delayed ones are sent.  One more message
// asks for -clamp-level, above the broker's last level: the broker clamps it to the last
// level, so its send succeeds and it must not arrive while the scenario runs.
//
// The scenario waits until every delayed message came or -wait-ms after the last send, and
// a moment more (a duplicate would come then).  It reports each send (status, queue) and
// each message's arrivals with their times, and leaves the verdict to the test.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func statusName(status primitive.SendStatus) string {
	names := map[primitive.SendStatus]string{
		primitive.SendOK: "SEND_OK", primitive.SendFlushDiskTimeout: "FLUSH_DISK_TIMEOUT",
		primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT", primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	}
	if name, ok := names[status]; ok {
		return name
	}
	return fmt.Sprintf("status %d", status)
}

// sendDelayed sends message index with delay level `level` (0: none) and reports the send.
func sendDelayed(p rocketmq.Producer, o options, index, level int) (sent, map[string]any) {
	m := message(o.topic, index, o.bodyBytes)
	if level > 0 {
		m.WithDelayTimeLevel(level)
	}
	at := time.Now()
	report := map[string]any{"index": index, "delayLevel": level, "sentAtMs": at.UnixMilli()}
	result, err := p.SendSync(context.Background(), m)
	if err != nil {
		report["error"] = err.Error()
		return sent{message: m}, report
	}
	report["status"] = statusName(result.Status)
	report["queueId"] = result.MessageQueue.QueueId
	report["queueOffset"] = result.QueueOffset
	report["msgId"] = result.MsgID
	report["offsetMsgId"] = result.OffsetMsgID
	return sent{m, result.MsgID, result.MessageQueue.QueueId, result.QueueOffset,
		result.MessageQueue.BrokerName}, report
}

func delayedProducer(o options) (rocketmq.Producer, error) {
	return startProducer(o, producer.WithInstanceName("go-p-"+o.topic))
}

// delayed runs -mode delay.  Message i < count is delayed, count is the warm-up and
// count + 1 the clamped one; the log knows them all, so each arrival is recorded.
func delayed(o options) (map[string]any, error) {
	p, err := delayedProducer(o)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	defer func() { _ = p.Shutdown() }()
	messages := make([]sent, o.count+2)
	warmUp, warmUpSend := sendDelayed(p, o, o.count, 0)
	if warmUpSend["status"] != "SEND_OK" {
		return nil, fmt.Errorf("warm-up send: %v", warmUpSend)
	}
	messages[o.count] = warmUp
	log := newDeliveryLog(messages, -1)
	pc, err := pushConsumer(o, o.group, o.topic, -1, 0, log.record)
	if err != nil {
		return nil, fmt.Errorf("push consumer: %w", err)
	}
	out := map[string]any{"scenario": "go-delay", "group": o.group, "level": o.level,
		"clampLevel": o.clampLevel}
	out["warmUpReceived"] = log.awaitIndex(o.count, o.timeout)
	sends := []map[string]any{}
	var lastSend time.Time
	for i := 0; i <= o.count; i++ {
		index, level := i, o.level
		if i == o.count {
			index, level = o.count+1, o.clampLevel
		} else {
			lastSend = time.Now()
		}
		one, report := sendDelayed(p, o, index, level)
		log.expect(index, one)
		sends = append(sends, report)
	}
	deadline := lastSend.Add(time.Duration(o.waitMs) * time.Millisecond)
	for !log.completeBelow(o.count) && time.Now().Before(deadline) {
		time.Sleep(waitStep)
	}
	time.Sleep(tail)
	_ = pc.Shutdown()
	out["sends"] = sends
	out["messages"], out["strangers"] = log.report()
	return out, nil
}

// expect sets what message index was sent as, once its send told its id and queue.
func (l *deliveryLog) expect(index int, s sent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[index] = s
}

// awaitIndex waits until message index came, or timeout.
func (l *deliveryLog) awaitIndex(index int, timeout time.Duration) bool {
	came := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.byIndex[index]) > 0
	}
	deadline := time.Now().Add(timeout)
	for !came() && time.Now().Before(deadline) {
		time.Sleep(waitStep)
	}
	return came()
}

// completeBelow: every message below count came at least once.
func (l *deliveryLog) completeBelow(count int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for index := 0; index < count; index++ {
		if len(l.byIndex[index]) == 0 {
			return false
		}
	}
	return true
}
