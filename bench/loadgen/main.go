// Command loadgen sends one request body to one HTTPS URL, either at a fixed rate (open loop,
// latency measured from each request's scheduled send time) or with a fixed number of requests
// in flight (closed loop, for capacity), and prints the results as one JSON line.
//
// It is the load side of bench/webhook.py: Go's client costs a fraction of what a Python client
// costs per request, so on a small machine the server, not the load generator, is measured.
// Standard library only.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "target URL")
	bodyFile := flag.String("body", "", "file holding the request body")
	caFile := flag.String("ca", "", "CA certificate (PEM) the server's certificate is signed by")
	rate := flag.Float64("rate", 1000, "requests per second (open loop)")
	seconds := flag.Float64("seconds", 10, "length of the run")
	inFlight := flag.Int("in-flight", 0, "closed loop with this many requests in flight (capacity)")
	freshEvery := flag.Int("fresh-every", 0, "send every Nth request on a new connection (a new TLS handshake); 0: never")
	flag.Parse()

	body, err := os.ReadFile(*bodyFile)
	check(err)
	ca, err := os.ReadFile(*caFile)
	check(err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 512,
			// Like the API server, reuse a bounded pool: under a stall, requests queue for a
			// connection instead of opening new ones (a TLS handshake storm on the server).
			MaxConnsPerHost:   64,
			ForceAttemptHTTP2: false,
		},
	}
	// A client that never reuses a connection: each of its requests is a new TLS handshake,
	// which sees the certificate the server holds at that moment (rotation tests).
	fresh := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			DisableKeepAlives: true,
		},
	}
	var sent atomic.Int64
	send := func() bool {
		c := client
		if *freshEvery > 0 && sent.Add(1)%int64(*freshEvery) == 0 {
			c = fresh
		}
		resp, err := c.Post(*url, "application/json", bytes.NewReader(body))
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	duration := time.Duration(*seconds * float64(time.Second))
	out := map[string]float64{}
	if *inFlight > 0 {
		var done, errors atomic.Int64
		deadline := time.Now().Add(duration)
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < *inFlight; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if !send() {
						errors.Add(1)
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		out["rps"] = float64(done.Load()) / time.Since(start).Seconds()
		out["errors"] = float64(errors.Load())
	} else {
		n := int(*rate * *seconds)
		interval := time.Duration(float64(time.Second) / *rate)
		latencies := make([]time.Duration, n)
		var errors atomic.Int64
		var wg sync.WaitGroup
		start := time.Now().Add(50 * time.Millisecond)
		for i := 0; i < n; i++ {
			scheduled := start.Add(time.Duration(i) * interval)
			time.Sleep(time.Until(scheduled))
			wg.Add(1)
			go func(i int, scheduled time.Time) {
				defer wg.Done()
				if !send() {
					errors.Add(1)
				}
				latencies[i] = time.Since(scheduled)
			}(i, scheduled)
		}
		wg.Wait()
		elapsed := time.Since(start).Seconds()
		sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
		q := func(p float64) float64 {
			i := int(p * float64(n))
			if i >= n {
				i = n - 1
			}
			return float64(latencies[i]) / float64(time.Millisecond)
		}
		out["sent"] = float64(n)
		out["errors"] = float64(errors.Load())
		out["seconds"] = elapsed
		out["p50_ms"], out["p99_ms"], out["p999_ms"], out["max_ms"] = q(0.5), q(0.99), q(0.999), q(1)
	}
	check(json.NewEncoder(os.Stdout).Encode(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
