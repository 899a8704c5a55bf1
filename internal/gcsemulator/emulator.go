package gcsemulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// DefaultAddr is the listen address of the front when Options.Addr is empty:
// a free loopback port.
const DefaultAddr = "127.0.0.1:0"

const (
	// readHeaderTimeout bounds how long a client may take to send a
	// request's headers.
	readHeaderTimeout = 30 * time.Second
	// stopTimeout bounds how long Stop waits for requests in flight before
	// closing their connections.
	stopTimeout = 5 * time.Second
	// listPageSize is the page size Buckets asks for.
	listPageSize = 1000
)

// Options configure an Emulator.
type Options struct {
	// Addr is the listen address of the front. Empty means DefaultAddr.
	Addr string
	// Dir is where buckets and objects are kept. Empty means in memory,
	// gone after Stop. Otherwise fake-gcs-server's filesystem backend is
	// rooted here (the directory is created if needed) and the front keeps
	// its bucket records here too, so buckets and their labels survive a
	// restart of the emulator. The filesystem backend cannot version
	// objects.
	Dir string
}

// BucketInfo describes one bucket as the emulator reports it.
type BucketInfo struct {
	Name         string
	Labels       map[string]string
	Location     string
	StorageClass string
}

// Emulator is an in-process fake-gcs-server behind a front that keeps bucket
// labels (which fake-gcs-server v1.56.1 drops), so ownership labels work as
// on real GCS. It also keeps location, storage class, uniform bucket-level
// access and metageneration per bucket; see the package documentation.
//
// Its methods are safe for concurrent use.
type Emulator struct {
	fake   *fakestorage.Server
	srv    *http.Server
	host   string
	client *http.Client
	// pageSize is the page size Buckets asks for; tests lower it.
	pageSize int

	served   chan struct{} // closed when srv.Serve returned
	serveErr error         // Serve's error other than ErrServerClosed; read after served

	stopOnce sync.Once
	stopErr  error
}

// Start starts the emulator and its front on opts.Addr. It returns once the
// front accepts connections.
func Start(opts Options) (*Emulator, error) {
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gcs emulator: listening on %s: %w", addr, err)
	}
	host, err := clientHost(ln.Addr())
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("gcs emulator: %w", err)
	}
	fr, fake, err := newEmulatorFront(opts.Dir, "http://"+host)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("gcs emulator: %w", err)
	}
	e := &Emulator{
		fake:     fake,
		srv:      &http.Server{Handler: fr, ReadHeaderTimeout: readHeaderTimeout},
		host:     host,
		client:   &http.Client{Transport: &http.Transport{Proxy: nil}},
		served:   make(chan struct{}),
		pageSize: listPageSize,
	}
	go func() {
		defer close(e.served)
		if err := e.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			e.serveErr = err
		}
	}()
	return e, nil
}

// newEmulatorFront starts fake-gcs-server without a listener, storing in dir
// (memory when empty), and returns the front that serves it. externalURL is
// the base URL clients reach the front at.
func newEmulatorFront(dir, externalURL string) (*front, *fakestorage.Server, error) {
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener:      true,
		Scheme:          "http",
		ExternalURL:     externalURL,
		BucketsLocation: defaultLocation,
		StorageRoot:     dir, // the filesystem backend creates it
	})
	if err != nil {
		return nil, nil, fmt.Errorf("starting fake-gcs-server: %w", err)
	}
	meta, err := newMetaStore(dir)
	if err != nil {
		fake.Stop()
		return nil, nil, err
	}
	fr := newFront(fake, meta, dir != "")
	if err := fr.forget(); err != nil {
		fake.Stop()
		return nil, nil, err
	}
	return fr, fake, nil
}

// clientHost is the host:port clients use to reach a listener at addr: the
// loopback address when it listens on every address.
func clientHost(addr net.Addr) (string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("listener address %s is not TCP", addr)
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port)), nil
}

// URL is the emulator's base URL, "http://127.0.0.1:PORT". The JSON API is
// under URL()+"/storage/v1/".
func (e *Emulator) URL() string { return "http://" + e.host }

// Host is the emulator's "127.0.0.1:PORT": the value for
// STORAGE_EMULATOR_HOST, which the Go storage client reads itself.
func (e *Emulator) Host() string { return e.host }

// Buckets lists every bucket with its labels, location and storage class,
// sorted by name. It asks the front, as a client would.
func (e *Emulator) Buckets(ctx context.Context) ([]BucketInfo, error) {
	var out []BucketInfo
	token := ""
	for {
		page, next, err := e.bucketsPage(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("gcs emulator: listing buckets: %w", err)
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// bucketsPage fetches one page of the bucket list.
func (e *Emulator) bucketsPage(ctx context.Context, token string) ([]BucketInfo, string, error) {
	q := url.Values{"project": {"emulator"}, "maxResults": {strconv.Itoa(e.pageSize)}}
	if token != "" {
		q.Set("pageToken", token)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+bucketsPath+"?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var list struct {
		Items []struct {
			Name         string            `json:"name"`
			Labels       map[string]string `json:"labels"`
			Location     string            `json:"location"`
			StorageClass string            `json:"storageClass"`
		} `json:"items"`
		NextPageToken string `json:"nextPageToken"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, "", fmt.Errorf("decoding the bucket list: %w", err)
	}
	page := make([]BucketInfo, 0, len(list.Items))
	for _, b := range list.Items {
		labels := b.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		page = append(page, BucketInfo{Name: b.Name, Labels: labels, Location: b.Location, StorageClass: b.StorageClass})
	}
	return page, list.NextPageToken, nil
}

// Stop stops the front, waiting up to a few seconds for requests in flight,
// and then fake-gcs-server. With Options.Dir set, the buckets stay on disk.
// Calling Stop again returns the first call's result.
func (e *Emulator) Stop() error {
	e.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		var errs []error
		if err := e.srv.Shutdown(ctx); err != nil {
			// Requests still in flight: close their connections.
			if cerr := e.srv.Close(); cerr != nil {
				errs = append(errs, fmt.Errorf("closing the front: %w", cerr))
			}
		}
		<-e.served
		e.client.CloseIdleConnections()
		e.fake.Stop()
		if e.serveErr != nil {
			errs = append(errs, fmt.Errorf("serving: %w", e.serveErr))
		}
		if err := errors.Join(errs...); err != nil {
			e.stopErr = fmt.Errorf("gcs emulator: %w", err)
		}
	})
	return e.stopErr
}
