package ssetest

import (
	"slices"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	stream := ": hello\n\nid: 7\nevent: popup\ndata: {\"a\":1,\ndata: \"b\":2}\nretry: 5\n\nevent: ready\n\n\n\ndata:no space\n\nevent: cut"
	out := make(chan Event, 10)
	Read(strings.NewReader(stream), out)
	var got []Event
	for ev := range out {
		got = append(got, ev)
	}
	want := []Event{
		{Comment: "hello"},
		{ID: "7", Event: "popup", Data: "{\"a\":1,\n\"b\":2}"},
		{Event: "ready"},
		{Data: "no space"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}
