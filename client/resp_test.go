package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadReply: every reply type, nulls, nesting, and the bounds.
func TestReadReply(t *testing.T) {
	in := "+OK\r\n-ERR not found\r\n:-42\r\n$5\r\nhe\r\nl\r\n$-1\r\n*-1\r\n*3\r\n:1\r\n*1\r\n$0\r\n\r\n-Filter is full\r\n"
	br := bufio.NewReader(strings.NewReader(in))
	want := []reply{
		{kind: '+', str: "OK"},
		{kind: '-', str: "ERR not found"},
		{kind: ':', num: -42},
		{kind: '$', str: "he\r\nl"},
		{},
		{},
		{kind: '*', arr: []reply{{kind: ':', num: 1}, {kind: '*', arr: []reply{{kind: '$', str: ""}}}, {kind: '-', str: "Filter is full"}}},
	}
	for i, w := range want {
		r, err := readReply(br)
		if err != nil || !equal(r, w) {
			t.Fatalf("reply %d: %+v %v, want %+v", i, r, err, w)
		}
	}
	if _, err := readReply(br); err != io.EOF {
		t.Fatalf("after the last reply: %v", err)
	}
	for _, bad := range []string{
		"$10\r\nshort\r\n", // ends early
		"$3\r\nabcde\r\n",  // not terminated where announced
		"$" + "99999999999999999999\r\n",
		"$600000000\r\n", // over maxBulk
		"*99999999\r\n",  // over maxArray
		":12a\r\n", ":\r\n", "?\r\n", "+OK\n", "\r\n",
		strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n",
	} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func equal(a, b reply) bool {
	if a.kind != b.kind || a.str != b.str || a.num != b.num || len(a.arr) != len(b.arr) {
		return false
	}
	for i := range a.arr {
		if !equal(a.arr[i], b.arr[i]) {
			return false
		}
	}
	return true
}

// TestAppendIdem: a request reads back, as an array of bulk strings, as the
// arguments it was made of.
func TestAppendIdem(t *testing.T) {
	b := appendIdem(nil, 1<<62, 7, []string{"CF.DEL", "coupons", "a\r\nb", ""})
	r, err := readReply(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range r.arr {
		got = append(got, e.str)
	}
	if strings.Join(got, "|") != "IDEM|4611686018427387904|7|CF.DEL|coupons|a\r\nb|" {
		t.Fatalf("%q", got)
	}
}

// FuzzReadReply: whatever a peer sends, the reader returns a reply or an error,
// never panics, and never holds more than the input's worth of data.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$3\r\nabc\r\n", "$-1\r\n",
		"*2\r\n:1\r\n:0\r\n", "*1\r\n-Filter is full\r\n", "*2\r\n:1\r\n$1\r\n\x00\r\n", "$2000000\r\nab"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReader(bytes.NewReader(in))
		for {
			r, err := readReply(br)
			if err != nil {
				if !errors.Is(err, errProtocol) && err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if size(r) > len(in) {
				t.Fatalf("a reply of %d bytes from %d bytes of input", size(r), len(in))
			}
		}
	})
}

// size is the reply's text and elements, for the bound above.
func size(r reply) int {
	n := len(r.str)
	for _, e := range r.arr {
		n += 1 + size(e)
	}
	return n
}

// FuzzAppendCommand: any arguments round-trip through the encoder and reader.
func FuzzAppendCommand(f *testing.F) {
	f.Add("BF.ADD", "key", "item")
	f.Add("", "\r\n", "$3\r\n")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		in := []string{a, b, c}
		r, err := readReply(bufio.NewReader(bytes.NewReader(appendCommand(nil, in))))
		if err != nil || r.kind != '*' || len(r.arr) != 3 {
			t.Fatalf("%q: %+v %v", in, r, err)
		}
		for i, e := range r.arr {
			if e.kind != '$' || e.str != in[i] {
				t.Fatalf("argument %d: %q, want %q", i, e.str, in[i])
			}
		}
	})
}
