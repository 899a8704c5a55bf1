package plugin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// watch asks the plugin a Handshake every PingInterval, each bounded by
// PingTimeout, until ctx ends (nil) or the plugin misses PingMisses pings
// in a row (the error saying so: it is hung). A process that lives but
// does not answer (stopped, deadlocked, swapped out) is thus found by its
// answers, not by its exit. From its first missed ping to its next answer
// the plugin is down: /readyz and engine_provider_up say so and calls
// fail at once with ProviderUnavailable instead of each waiting out its
// deadline.
func (p *Plugin) watch(ctx context.Context, conn *grpc.ClientConn) error {
	t := time.NewTicker(p.opts.PingInterval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := p.ping(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			if missed > 0 {
				p.setSilent(nil)
				p.log.Info("provider plugin answers again")
			}
			missed = 0
			continue
		}
		missed++
		err = fmt.Errorf("%w (%d in a row)", err, missed)
		if missed >= p.opts.PingMisses {
			return err
		}
		p.setSilent(err)
		if missed == 1 {
			p.log.Error(err, "provider plugin does not answer")
		}
	}
}

// ping asks the plugin one Handshake within PingTimeout.
func (p *Plugin) ping(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.PingTimeout)
	defer cancel()
	var resp handshakeResponse
	err := conn.Invoke(ctx, fullMethod(methodHandshake), &handshakeRequest{ProtocolVersion: ProtocolVersion, Name: p.opts.Name}, &resp, grpc.WaitForReady(false))
	switch {
	case err == nil:
		return nil
	case status.Code(err) == codes.DeadlineExceeded:
		return fmt.Errorf("no answer to a ping within %s", p.opts.PingTimeout)
	default:
		return fmt.Errorf("ping: %s", status.Convert(err).Message())
	}
}

// setSilent marks the published plugin down while it does not answer
// (err), or up again (nil). The gauge is set under the lock, so that a
// setDown racing with it has the last word.
func (p *Plugin) setSilent(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return
	}
	p.silent = err
	up := 0.0
	if err == nil {
		up = 1
	}
	metricUp.WithLabelValues(p.opts.Name).Set(up)
}
