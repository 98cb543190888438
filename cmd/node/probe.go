package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// probe is `rookery probe URL`: it exits 0 if URL answers 200 within two
// seconds, 1 otherwise. Container health checks use it, since the image holds
// nothing but the binary (no curl, no shell).
func probe(args []string, out io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(out, "usage: rookery probe URL")
		return 2
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(args[0])
	if err != nil {
		fmt.Fprintln(out, "probe:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(out, "probe:", resp.Status)
		return 1
	}
	return 0
}
