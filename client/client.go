package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where daemons listen.
const (
	// SocketEnv names the variable that points clients at a daemon's
	// socket, after an explicit one and before the defaults.
	SocketEnv = "GPUSCHED_SOCKET"
	// SystemSocket is the system daemon's socket (gpusched daemon
	// --system).
	SystemSocket = "/run/gpusched/gpusched.sock"
	// SocketName is the socket's file name in the per-user folder.
	SocketName = "gpusched.sock"
)

// UserSocketDir is the folder of the per-user daemon's socket:
// $XDG_RUNTIME_DIR/gpusched, or /tmp/gpusched-UID when XDG_RUNTIME_DIR
// is unset. The daemon makes it mode 0700 and refuses one that another
// user owns.
func UserSocketDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gpusched")
	}
	return filepath.Join(os.TempDir(), "gpusched-"+strconv.Itoa(os.Getuid()))
}

// UserSocket is the per-user daemon's socket.
func UserSocket() string { return filepath.Join(UserSocketDir(), SocketName) }

// Candidates returns the sockets Dial tries, in order: explicit alone when
// it is not empty, else $GPUSCHED_SOCKET alone when set, else the
// per-user socket then the system one.
func Candidates(explicit string) []string {
	switch {
	case explicit != "":
		return []string{explicit}
	case os.Getenv(SocketEnv) != "":
		return []string{os.Getenv(SocketEnv)}
	}
	return []string{UserSocket(), SystemSocket}
}

// ErrNoDaemon: no daemon answers on any socket tried.
var ErrNoDaemon = errors.New("no gpusched daemon answers")

// Client talks to one daemon. Its methods are safe for concurrent use.
type Client struct {
	socket  string
	http    *http.Client
	version Version
}

// Dial connects to the daemon on socket, or, with socket "", to the first
// that answers of Candidates(""), and checks that it speaks APIVersion (a
// *VersionError if not). With no daemon answering, the error wraps
// ErrNoDaemon and names the sockets tried.
func Dial(ctx context.Context, socket string) (*Client, error) {
	var tried []string
	for _, s := range Candidates(socket) {
		c := newClient(s)
		v, err := c.Version(ctx)
		if err == nil {
			c.version = v
			if v.APIMin > APIVersion || v.APIMax < APIVersion {
				c.Close()
				return nil, &VersionError{Socket: s, Daemon: v}
			}
			return c, nil
		}
		c.Close()
		if !Unreachable(err) {
			return nil, err
		}
		tried = append(tried, s)
	}
	return nil, fmt.Errorf("%w on %s", ErrNoDaemon, strings.Join(tried, " or "))
}

// DialUnchecked returns a client of the daemon on socket without asking
// its version first, for what works with a daemon of any version:
// Version and Shutdown, whose routes never change.
func DialUnchecked(socket string) *Client { return newClient(socket) }

// newClient is a client of the daemon on socket, not yet checked.
func newClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket returns the socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Daemon returns what the daemon said of itself when Dial reached it.
func (c *Client) Daemon() Version { return c.version }

// Close lets go of the client's idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// Unreachable reports whether err means that nothing answers on the socket
// (none there, or nobody listening), as opposed to a daemon that answered
// with an error.
func Unreachable(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return errors.Is(err, ErrNoDaemon)
}

// Error is a daemon's refusal: its HTTP status and its one-line message.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// VersionError: the daemon does not speak this client's API version.
type VersionError struct {
	Socket string
	Daemon Version
}

func (e *VersionError) Error() string {
	v := e.Daemon
	return fmt.Sprintf("the gpusched daemon on %s (pid %d, gpusched %s) serves API versions %d to %d, and this client speaks %d: "+
		"stop it with `gpusched daemon stop` (its tasks keep running and the next daemon adopts them) and start the daemon of this gpusched (`gpusched daemon`), or use the gpusched of the daemon's version",
		e.Socket, v.PID, v.Build, v.APIMin, v.APIMax, APIVersion)
}

// do sends a request and decodes a JSON answer into out (nil: ignore it).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.send(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("read the daemon's answer to %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns the response of a 2xx answer; any
// other is an *Error with the daemon's message.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	u := "http://gpusched" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s %s: %s", method, path, strings.TrimSpace(resp.Status+" "+string(b)))
		}
		return nil, &Error{Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}
