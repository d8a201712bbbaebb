package drill

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// receiver is a webhook receiver on loopback: it checks each POST's
// signature and records the events it got, as a shop's would.
type receiver struct {
	srv    *http.Server
	url    string
	secret string

	mu         sync.Mutex
	seen       map[string]bool
	duplicates int
	badSigs    int
	posts      int
	last       time.Time
}

func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{seen: map[string]bool{}, url: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) close() { _ = r.srv.Close() }

func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	r.secret = s
	r.mu.Unlock()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	if !validSignature(r.secret, req.Header.Get("Stockhold-Signature"), body) {
		r.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var batch struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	if err := json.Unmarshal(body, &batch); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, e := range batch.Events {
		if r.seen[e.ID] {
			r.duplicates++ // delivery is at least once
		}
		r.seen[e.ID] = true
	}
	r.last = time.Now()
	w.WriteHeader(http.StatusNoContent)
}

// validSignature checks "t=<unix>,v1=<hex HMAC-SHA256 of t.body>".
func validSignature(secret, header string, body []byte) bool {
	var t, v1 string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t = v
		case "v1":
			v1 = v
		}
	}
	if t == "" || v1 == "" || secret == "" {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "."))
	mac.Write(body)
	return hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(v1))
}

// got returns a copy of the event ids received so far.
func (r *receiver) got() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.seen))
	for k := range r.seen {
		out[k] = true
	}
	return out
}
