package readme

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/internal/debian"
)

// update, set by `make readme` (UPDATE_README=1), rewrites the answers of
// a document where one differs instead of failing; rewriteAll
// (UPDATE_README=all) rewrites every document's answers, so that each
// document's answers come from one run.
var (
	update     = os.Getenv("UPDATE_README") == "1" || rewriteAll
	rewriteAll = os.Getenv("UPDATE_README") == "all"
)

// root is the repository's root, where README.md and the Makefile are.
var root = filepath.Join("..", "..")

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	require.NoError(t, err)
	return string(b)
}

func writeDoc(t *testing.T, name, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(text), 0o644))
}

// settingsDoc is the document whose settings table app/config generates.
const settingsDoc = "docs/configuration.md"

// TestGenerated checks what is generated from app/config's registry: the
// settings table of docs/configuration.md and deploy/stockhold.env.
func TestGenerated(t *testing.T) {
	doc := readDoc(t, settingsDoc)
	table, ok := Generated(doc, "settings")
	require.True(t, ok, "%s has no <!-- generated:settings --> region", settingsDoc)
	env := readDoc(t, "deploy/stockhold.env")
	if update {
		doc, err := SetGenerated(doc, "settings", config.MarkdownTable())
		require.NoError(t, err)
		writeDoc(t, settingsDoc, doc)
		writeDoc(t, "deploy/stockhold.env", config.EnvFile())
		return
	}
	require.Equal(t, config.MarkdownTable(), table, "the settings table of %s is stale: run make readme", settingsDoc)
	require.Equal(t, config.EnvFile(), env, "deploy/stockhold.env is stale: run make readme")
}

// The addresses the README shows: the server's (its commands reach it as
// $BASE, which the export line `make run` prints sets), and the webhook
// receiver's, which its commands name. In a session each is a free port of
// its own (sessions run at once, beside other checkouts' tests), never
// :8080, and the answers are shown with these.
const (
	readmeServer   = "localhost:8080"
	readmeReceiver = "127.0.0.1:18192"
)

// TestREADME runs the README's sessions (see the package comment) against
// fresh servers, each exchange checked against openapi.json, and requires
// the answers the README shows to be what the commands printed, beyond
// what changes from run to run (Normalize). With UPDATE_README=1 it
// rewrites the answers that differ instead.
func TestREADME(t *testing.T) {
	runDoc(t, "README.md")
}

// TestRunbook runs docs/OPERATIONS.md's sessions the same way: what to do
// on call and the trial launch runbook, each of whose steps is a command
// anyone can run here, are held to what they show (make readme rewrites
// them too). The rest of that page (install, upgrade, backups) is commands
// for a real host, marked norun.
func TestRunbook(t *testing.T) {
	runDoc(t, "docs/OPERATIONS.md")
}

// TestGuides runs the sessions of every guide in docs/guides the same way,
// each guide on its own: a guide is a task a reader follows from its
// first command, so each one's blocks run against fresh servers.
func TestGuides(t *testing.T) {
	guides, err := filepath.Glob(filepath.Join(root, "docs", "guides", "*.md"))
	require.NoError(t, err)
	if len(guides) == 0 {
		t.Skip("no guides in docs/guides")
	}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		require.NoError(t, err)
		t.Run(strings.TrimSuffix(filepath.Base(g), ".md"), func(t *testing.T) {
			t.Parallel()
			runDoc(t, rel)
		})
	}
}

// runDoc runs the sessions of the document name (a path from the
// repository's root) and checks, or with UPDATE_README=1 rewrites, the
// answers it shows.
func runDoc(t *testing.T, name string) {
	doc := readDoc(t, name)
	checkConvention(t, name, doc)
	sessions := Steps(doc)
	require.NotEmpty(t, sessions, "%s has no run blocks", name)
	// The walk-through's commands need curl and jq, as a reader's shell
	// does; CI (root) installs what is missing.
	for _, program := range []string{"curl", "jq"} {
		if _, err := debian.Ensure(program, program); errors.Is(err, debian.ErrNotRoot) {
			t.Skip(err)
		} else {
			require.NoError(t, err, "install %s", program)
		}
	}

	var (
		mu   sync.Mutex
		outs = map[string][]string{}
	)
	t.Run("sessions", func(t *testing.T) {
		for session, steps := range sessions {
			t.Run(session, func(t *testing.T) {
				t.Parallel()
				got := runSession(t, steps)
				mu.Lock()
				outs[session] = got
				mu.Unlock()
				if update {
					return
				}
				for i, s := range steps {
					if s.Output == nil || Normalize(got[i]) == Normalize(s.Output.Body) {
						continue
					}
					t.Errorf("%s line %d: the command at line %d printed something else than it shows "+
						"(run make readme to rewrite it):\n--- %s\n%s--- this run\n%s--- masked, %s\n%s--- masked, this run\n%s",
						name, s.Output.Line, s.Run.Line, name, s.Output.Body, got[i], name, Normalize(s.Output.Body), Normalize(got[i]))
				}
			})
		}
	})
	if !update || t.Failed() {
		return
	}
	bodies := Rewrites(sessions, outs)
	if rewriteAll {
		bodies = All(sessions, outs)
	}
	if len(bodies) > 0 {
		writeDoc(t, name, Replace(readDoc(t, name), bodies))
		lines := make([]int, 0, len(bodies))
		for l := range bodies {
			lines = append(lines, l)
		}
		sort.Ints(lines)
		t.Logf("rewrote the answers at %s lines %v", name, lines)
	}
}

var serverCommand = regexp.MustCompile(`localhost:8080|\$BASE|\$OPS|\$SHOP|\bstockhold `)

// serverAddress is the server's address written out in a command, where
// $BASE belongs.
var serverAddress = regexp.MustCompile(`localhost:8080|127\.0\.0\.1:8080|:8080/`)

// checkConvention holds a document to the block convention: every output
// block follows a run block, and every shell command against the server
// is run by a session (a command the test does not run can rot).
func checkConvention(t *testing.T, name, doc string) {
	t.Helper()
	blocks := Blocks(doc)
	shown := map[int]bool{}
	for _, steps := range Steps(doc) {
		for _, s := range steps {
			if s.Output != nil {
				shown[s.Output.Line] = true
			}
		}
	}
	for _, b := range blocks {
		lang := strings.Fields(b.Info + " x")[0]
		if path := b.File(); path != "" {
			file, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				t.Errorf("%s line %d: the block shows %s, which cannot be read: %v", name, b.Line, path, err)
			} else if string(file) != b.Body {
				t.Errorf("%s line %d: the block is not %s as it is (the file is what the tests run): copy it again", name, b.Line, path)
			}
			continue
		}
		switch {
		case b.IsOutput() && !shown[b.Line]:
			t.Errorf("%s line %d: an output block that follows no run block", name, b.Line)
		case lang == "sh" && b.Session() == "" && slices.ContainsFunc(strings.Fields(b.Info), func(w string) bool { return strings.HasPrefix(w, "run") }):
			t.Errorf("%s line %d: info %q: a run block is \"sh run:SESSION\"", name, b.Line, b.Info)
		case lang == "go" && b.Session() == "":
			t.Errorf("%s line %d: a Go snippet that no session compiles and runs: make it a whole program in a \"go run:SESSION\" block", name, b.Line)
		case lang == "sh" && serverAddress.MatchString(b.Body):
			t.Errorf("%s line %d: a command names the server's address: use $BASE (the export line `make run` prints sets it)", name, b.Line)
		case lang == "sh" && b.Session() == "" && !strings.Contains(b.Info, "norun") && serverCommand.MatchString(b.Body):
			t.Errorf("%s line %d: a command against the server or the CLI that no session runs: "+
				"make it \"sh run:SESSION\" (or \"sh norun\" with a reason beside it)", name, b.Line)
		}
	}
}

// freePort returns a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// stepMark ends each step's output in the session's transcript.
const stepMark = "@@readme-step-end@@"

// runSession runs one session's steps in one bash process against a
// server of its own, and returns what each step printed, with the
// session's addresses written back as the README names them.
func runSession(t *testing.T, steps []Step) []string {
	pool := dbtest.New(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "stockhold")

	// The proxy curl talks to: every exchange is checked against the
	// OpenAPI document on its way through.
	serverPort := freePort(t)
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	proxyAddr := proxyLn.Addr().String()
	serverAddr := "127.0.0.1:" + strconv.Itoa(serverPort)
	receiverAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	target := &url.URL{Scheme: "http", Host: serverAddr}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = apitest.Transport(t, nil)
	proxySrv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxySrv.Serve(proxyLn) }()
	t.Cleanup(func() { _ = proxySrv.Close() })

	// Commands reach the server as $BASE: the export line sets it to the
	// server's address, which the session points at the proxy instead.
	toSession := strings.NewReplacer(serverAddr, proxyAddr, readmeReceiver, receiverAddr)
	toREADME := strings.NewReplacer(proxyAddr, readmeServer, serverAddr, readmeServer, receiverAddr, readmeReceiver,
		filepath.Dir(bin), "/path/to/stockhold/bin")

	banner, env := startServer(t, dbtest.URL(t, pool), bin, serverAddr)
	require.Contains(t, env, " BASE=http://"+serverAddr+" ", "the export line sets BASE to where make run serves, a port of the session's own")

	var script strings.Builder
	script.WriteString("exec 2>&1\nset -o pipefail\ncd " + shellQuote(dir) + "\n")
	script.WriteString(toSession.Replace(env) + "\n")
	goRoot := goWorkspace(t, dir)
	outs := make([]string, len(steps))
	var ran []int
	for i, s := range steps {
		if strings.TrimSpace(s.Run.Body) == "make run" {
			outs[i] = toREADME.Replace(banner)
			continue
		}
		ran = append(ran, i)
		body := toSession.Replace(s.Run.Body)
		if strings.Fields(s.Run.Info)[0] == "go" {
			// A Go program: written to a package of its own in a module
			// that, through a workspace, imports this checkout's packages,
			// and run with the session's environment (BASE, SHOP, OPS).
			pkg := filepath.Join(goRoot, fmt.Sprintf("step%d", i))
			body = fmt.Sprintf("mkdir -p %s && cat > %s <<'STOCKHOLD_GO_EOF'\n%sSTOCKHOLD_GO_EOF\n(cd %s && GOWORK=%s go run .)\n",
				shellQuote(pkg), shellQuote(filepath.Join(pkg, "main.go")), body, shellQuote(pkg), shellQuote(filepath.Join(goRoot, "go.work")))
		}
		script.WriteString(body)
		script.WriteString("\nprintf '\\n" + stepMark + "\\n'\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var transcript bytes.Buffer
	cmd.Stdout = &transcript
	err = cmd.Run()
	// Whatever a step left running (a receiver) ends with the session.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	require.NoError(t, err, "the session's bash failed; it printed:\n%s", transcript.String())
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM webhooks`),
		"a session deletes the webhooks it registers: one whose receiver has exited gets a failed delivery every minute or so, logged")
	parts := strings.Split(transcript.String(), "\n"+stepMark+"\n")
	require.Len(t, parts, len(ran)+1, "every step ends with its mark; the transcript:\n%s", transcript.String())
	for k, i := range ran {
		out := strings.TrimRight(toREADME.Replace(parts[k]), "\n")
		if out != "" {
			out += "\n"
		}
		outs[i] = out
	}
	return outs
}

// goWorkspace makes, under dir, a module for the session's Go programs and
// a workspace that adds this checkout to it, so they import stockhold's
// packages (its generated client) as they are here. It returns the
// module's directory.
func goWorkspace(t *testing.T, dir string) string {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	version := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	require.NotNil(t, version, "go.mod has a go line")
	checkout, err := filepath.Abs(root)
	require.NoError(t, err)
	goRoot := filepath.Join(dir, "go")
	require.NoError(t, os.MkdirAll(goRoot, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(goRoot, "go.mod"), fmt.Appendf(nil, "module readmesnippets\n\ngo %s\n", version[1]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(goRoot, "go.work"), fmt.Appendf(nil, "go %s\n\nuse (\n\t.\n\t%s\n)\n", version[1], checkout), 0o644))
	return goRoot
}

// startServer runs `make run` on the session's database and address, the
// way a reader does, and returns its banner and the export line it prints
// for the reader's second shell. The server stops with the test.
func startServer(t *testing.T, dbURL, bin, addr string) (banner, export string) {
	t.Helper()
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "run", "STOCKHOLD_BIN="+bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "STOCKHOLD_ADDR="+addr, "STOCKHOLD_LOG_LEVEL=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var logs syncBuffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("make run's log:\n%s", logs.String())
		}
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var b strings.Builder
	started := false
	deadline := time.After(4 * time.Minute)
	for export == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "make run ended before printing its banner; it logged:\n%s", logs.String())
			if line == "stockhold dev instance" {
				started = true
			}
			if started {
				b.WriteString(line + "\n")
			}
			if e, ok := strings.CutPrefix(line, "  export "); ok && started {
				export = "export " + e
			}
		case <-deadline:
			t.Fatalf("make run printed no banner in 4 minutes; it logged:\n%s", logs.String())
		}
	}
	go func() {
		for range lines {
		}
	}()

	// Ready when /readyz says so (the banner comes just before serve starts).
	client := &http.Client{Timeout: 2 * time.Second}
	require.Eventually(t, func() bool {
		res, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "make run's server never became ready; it logged:\n%s", logs.String())
	return b.String(), export
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
