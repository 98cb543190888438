package command

import (
	"io"
	"testing"
)

func TestLookup(t *testing.T) {
	run := func(args []string, _ func(string) (string, bool), _, _ io.Writer) int { return len(args) }
	v := Command{Name: "version", Synopsis: "print the version", Run: run}
	tab := Table{v, Alias("--version", v)}
	c, ok := tab.Lookup("--version")
	if !ok || c.Name != "--version" || c.Synopsis != "" || c.Run([]string{"a", "b"}, nil, nil, nil) != 2 {
		t.Errorf("the alias: %+v %v", c, ok)
	}
	if c, ok := tab.Lookup("version"); !ok || c.Synopsis != "print the version" {
		t.Errorf("version: %+v %v", c, ok)
	}
	if _, ok := tab.Lookup("--dev"); ok {
		t.Error("a node's flag taken for a command")
	}
}
