package coalesce

import (
	"slices"
	"testing"
)

type item struct {
	key string
	n   int
}

func drain(q *Queue[string, item]) []item {
	var out []item
	for {
		select {
		case v := <-q.C():
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestQueue(t *testing.T) {
	tests := []struct {
		name        string
		capacity    int
		send        []item
		wantDirect  []bool
		wantFirst   []item // read after the sends
		wantWaiting int    // after the first read
		wantThen    []item // read after a Flush
	}{
		{
			name: "room for everything", capacity: 3,
			send:       []item{{"a", 1}, {"b", 1}, {"a", 2}},
			wantDirect: []bool{true, true, true},
			wantFirst:  []item{{"a", 1}, {"b", 1}, {"a", 2}},
		},
		{
			name: "a full channel coalesces per key, never drops a key", capacity: 1,
			send:        []item{{"a", 1}, {"b", 1}, {"c", 1}, {"b", 2}, {"a", 2}},
			wantDirect:  []bool{true, false, false, false, false},
			wantFirst:   []item{{"a", 1}},
			wantWaiting: 2,
			wantThen:    []item{{"b", 2}},
		},
		{
			name: "unbuffered", capacity: 0,
			send:        []item{{"a", 1}, {"a", 2}},
			wantDirect:  []bool{false, false},
			wantWaiting: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := New[string, item](tc.capacity)
			for i, v := range tc.send {
				if got := q.Send(v.key, v); got != tc.wantDirect[i] {
					t.Errorf("Send(%v) = %v, want %v", v, got, tc.wantDirect[i])
				}
			}
			if got := drain(q); !slices.Equal(got, tc.wantFirst) {
				t.Errorf("first read = %v, want %v", got, tc.wantFirst)
			}
			if got := q.Flush(); got != tc.wantWaiting {
				t.Errorf("Flush() = %d waiting, want %d", got, tc.wantWaiting)
			}
			if got := drain(q); !slices.Equal(got, tc.wantThen) {
				t.Errorf("read after Flush = %v, want %v", got, tc.wantThen)
			}
		})
	}
}

func TestQueueKeepsOrderPerKey(t *testing.T) {
	q := New[string, item](1)
	q.Send("a", item{"a", 1})
	q.Send("a", item{"a", 2}) // waits
	q.Send("b", item{"b", 1}) // waits behind a
	var got []item
	for q.Flush() > 0 || len(q.C()) > 0 {
		got = append(got, <-q.C())
	}
	want := []item{{"a", 1}, {"a", 2}, {"b", 1}}
	if !slices.Equal(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
}
