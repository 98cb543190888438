package importcmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rookerydb/rookery/cmd/node/internal/humanize"
)

// progress shows how an import goes: a bar on a terminal (bytes read, with
// the percentage and the time left when the input's size is known, and the
// keys and their rate), else a log line every --log-every.
type progress struct {
	im   *importer
	bar  *progressbar.ProgressBar // nil: log lines
	stop chan struct{}
	done chan struct{}
}

// barRefresh is how often the bar is redrawn.
const barRefresh = 200 * time.Millisecond

// startProgress starts showing progress as --progress says.
func (im *importer) startProgress() {
	mode := im.o.progress
	if mode == "none" {
		return
	}
	if mode == "auto" {
		mode = "log"
		if f, ok := im.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	p := &progress{im: im, stop: make(chan struct{}), done: make(chan struct{})}
	every := im.o.logEvery
	if mode == "bar" {
		every = barRefresh
		p.bar = progressbar.NewOptions64(totalSize(im.inputs),
			progressbar.OptionSetWriter(im.stderr),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionSetDescription("import"))
	}
	im.outMu.Lock()
	im.prog = p
	im.outMu.Unlock()
	go p.loop(every)
}

// stopProgress ends the bar, or writes a last log line.
func (im *importer) stopProgress() {
	p := im.prog
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	im.outMu.Lock()
	defer im.outMu.Unlock()
	if p.bar != nil {
		p.update()
		_ = p.bar.Exit()
		fmt.Fprintln(im.stderr)
	}
	im.prog = nil
}

func (p *progress) loop(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.im.outMu.Lock()
		if p.bar != nil {
			p.update()
		} else {
			p.logLine(p.im.stderr)
		}
		p.im.outMu.Unlock()
	}
}

// update redraws the bar. The caller holds outMu.
func (p *progress) update() {
	keys, rate := p.keys()
	p.bar.Describe(fmt.Sprintf("%s keys, %s keys/s", count(keys), count(int64(rate))))
	_ = p.bar.Set64(p.im.src.read.Load())
}

// clear takes the bar off the line, for a message. The caller holds outMu.
func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

// keys is how many keys have been answered, and their rate.
func (p *progress) keys() (int64, float64) {
	keys := p.im.added.Load() + p.im.dups.Load()
	return keys, float64(keys) / max(time.Since(p.im.start).Seconds(), 1e-3)
}

// logLine writes one line: keys, rate, input read, and the time left.
func (p *progress) logLine(w io.Writer) {
	keys, rate := p.keys()
	read, total := p.im.src.read.Load(), totalSize(p.im.inputs)
	line := fmt.Sprintf("import: %s keys, %s keys/s, line %d, %s read", count(keys), count(int64(rate)),
		p.im.src.lineCount(), humanize.Bytes(read))
	if total > 0 && read > 0 {
		elapsed := time.Since(p.im.start)
		left := time.Duration(float64(elapsed) * float64(total-read) / float64(read))
		if left >= 10*time.Second {
			left = left.Round(time.Second)
		} else {
			left = left.Round(100 * time.Millisecond)
		}
		line += fmt.Sprintf(" of %s (%.0f%%), ETA %s", humanize.Bytes(total), 100*float64(read)/float64(total), left)
	}
	fmt.Fprintln(w, line)
}

// count writes n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
