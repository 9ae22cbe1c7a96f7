package main

// The two halves of produce-consume, run apart: a message sent by one run is read by
// another, later one (the e2e drain of a broker group: messages sent to the group, the
// group made read only, then its backlog read to the end by the same consumer group).

import "fmt"

// produceOnly sends -count messages of the corpus from index -first and reports how many
// went to each broker.
func produceOnly(o options) (map[string]any, error) {
	messages, err := produce(o)
	if err != nil {
		return nil, err
	}
	sentByBroker := map[string]int{}
	for _, s := range messages {
		sentByBroker[s.broker]++
	}
	return map[string]any{"scenario": "go-produce", "sent": len(messages),
		"sentByBroker": sentByBroker, "ok": len(messages) == o.count}, nil
}

// consumeOnly reads the topic with -group until the -count messages of the corpus from
// index -first have come (or -timeout-s), each compared with the corpus; a message outside
// that range counts as unexpected, a second copy as a duplicate.
func consumeOnly(o options) (map[string]any, error) {
	if err := awaitRoute(o, o.topic, routeTimeout); err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	c := &checker{expected: map[int]sent{}, counts: map[int]int{},
		byBroker: map[string]int{}, corpusOnly: true}
	for i := o.first; i < o.first+o.count; i++ {
		c.expected[i] = sent{message: message(o.topic, i, o.bodyBytes)}
	}
	if err := consume(o, c); err != nil {
		return nil, err
	}
	report := c.report(o, o.count)
	report["scenario"] = "go-consume"
	delete(report, "sentByBroker")
	return report, nil
}
