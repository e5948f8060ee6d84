package kafkaio

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/sinks/kafkaio/kafkatest"
)

// FromTime starts every partition at its first record at or after the
// time and ToTime ends it before that record; a time past the last
// record starts at the end (nothing read) or ends at the end (everything
// read), and a time before the first record starts at the beginning.
// Kafka answers "no record at or after this time" with offset -1 (the
// embedded broker with the end offset): both mean the end.
func TestScanFromAndToTime(t *testing.T) {
	c := startBrokerWith(t, kafkatest.Prefix(t), 2, "in")
	in := c.Topic("in")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	w, err := NewWriter(WriteConfig{Config: c, Topic: in, BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 20
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i), Time: base.Add(time.Duration(i) * time.Second)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	scan := func(rc ReadConfig) []int {
		t.Helper()
		rc.Config, rc.Topic = c, in
		var got []int
		if err := Scan(context.Background(), rc, func(m Message) error {
			i, _ := strconv.Atoi(string(m.Value))
			if m.TimeMS != base.Add(time.Duration(i)*time.Second).UnixMilli() {
				t.Errorf("record %d has time %d", i, m.TimeMS)
			}
			got = append(got, i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sort.Ints(got)
		return got
	}
	span := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	for _, tc := range []struct {
		what string
		rc   ReadConfig
		want []int
	}{
		{"from record 12's time", ReadConfig{FromTime: at(12)}, span(12, n)},
		{"to record 7's time", ReadConfig{ToTime: at(7)}, span(0, 7)},
		{"from 5 to 9", ReadConfig{FromTime: at(5), ToTime: at(9)}, span(5, 9)},
		{"from before the first record", ReadConfig{FromTime: at(-100)}, span(0, n)},
		{"from after the last record", ReadConfig{FromTime: at(n + 100)}, nil},
		{"to after the last record", ReadConfig{ToTime: at(n + 100)}, span(0, n)},
		{"to before the first record", ReadConfig{ToTime: at(-100)}, nil},
	} {
		if got := scan(tc.rc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: read %v, want %v", tc.what, got, tc.want)
		}
	}
}
