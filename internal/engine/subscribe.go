package engine

import (
	"errors"
	"fmt"
	"sync"
)

// Event streams.
//
// Every event the engine publishes (those Config.Observer sees) gets a
// sequence number, Event.Seq, and goes after its commit to the observer,
// then to every subscriber, in commit order. A subscriber reads from a
// channel of its own with a bounded buffer; the loop never waits for it: a
// subscriber whose buffer is full when an event comes is dropped (its
// channel is closed and Err says why), and can subscribe again from the
// last event it read, as long as the engine still keeps the events after
// it (the last EventHistory).

// EventHistory is how many of the latest events the engine keeps for
// subscribers that resume from an earlier event.
const EventHistory = 4096

// DefaultSubscriberBuffer is a subscriber's buffer when Subscribe is given
// none.
const DefaultSubscriberBuffer = 256

// Errors of subscriptions.
var (
	// ErrSlowSubscriber: the subscriber's buffer was full when an event
	// came, so it was dropped.
	ErrSlowSubscriber = errors.New("subscriber dropped: it fell behind")
	// ErrTooOld: the events after the one to resume from are no longer
	// kept. Read the records afresh and subscribe from 0.
	ErrTooOld = errors.New("the events to resume from are no longer kept")
	// ErrNotPublished: the event to resume from was not published by this
	// engine (sequence numbers start again at 1 when an engine opens).
	ErrNotPublished = errors.New("no such event in this engine's life")
)

// Subscription is a stream of the engine's events (Subscribe).
type Subscription struct {
	e  *Engine
	ch chan Event

	mu  sync.Mutex // guards err
	err error      // why ch was closed, set before it is

	dropped bool // ch is closed; owned by the loop
}

// C returns the events, in Seq order without gaps. It is closed when the
// subscription ends: Close, a dropped subscriber (Err), the engine closed.
func (s *Subscription) C() <-chan Event { return s.ch }

// Err says why C was closed: ErrSlowSubscriber (wrapped, with how far it
// fell behind) or ErrClosed; nil while it is open and after Close.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription; C is closed when it returns. It must not be
// called from Config.Observer.
func (s *Subscription) Close() {
	reply := make(chan struct{}, 1)
	if s.e.send(unsubscribeEvent{s, reply}) {
		await(s.e, reply)
	}
}

// Subscribe starts a stream of the engine's events. from is the Seq of the
// last event the caller has seen: it gets every later event, first those
// still kept (ErrTooOld if some are gone, ErrNotPublished if from is
// beyond the last), then each as it is published. from 0 means only events
// published from now on. buffer bounds the events waiting to be read
// besides those replayed; 0 means DefaultSubscriberBuffer. A subscriber
// that lets its buffer fill up is dropped.
func (e *Engine) Subscribe(from uint64, buffer int) (*Subscription, error) {
	if buffer < 0 {
		return nil, fmt.Errorf("subscribe: buffer must not be negative, got %d", buffer)
	}
	reply := make(chan subscribed, 1)
	if !e.send(subscribeEvent{from, buffer, reply}) {
		return nil, ErrClosed
	}
	r, ok := await(e, reply)
	if !ok {
		return nil, ErrClosed
	}
	return r.sub, r.err
}

type subscribed struct {
	sub *Subscription
	err error
}

type subscribeEvent struct {
	from   uint64
	buffer int
	reply  chan subscribed
}

func (ev subscribeEvent) apply(e *Engine) {
	if e.closing != nil {
		ev.reply <- subscribed{nil, ErrClosed}
		return
	}
	s := &e.svc
	var replay []Event
	if ev.from > 0 {
		oldest := s.seq - min(s.seq, uint64(len(s.ring))) + 1 // the first event still kept
		switch {
		case ev.from > s.seq:
			ev.reply <- subscribed{nil, fmt.Errorf("subscribe after event %d: %w (the last is %d)", ev.from, ErrNotPublished, s.seq)}
			return
		case ev.from+1 < oldest:
			ev.reply <- subscribed{nil, fmt.Errorf("subscribe after event %d: %w (the oldest kept is %d)", ev.from, ErrTooOld, oldest)}
			return
		}
		for q := ev.from + 1; q <= s.seq; q++ {
			replay = append(replay, s.ring[q%uint64(len(s.ring))])
		}
	}
	buffer := ev.buffer
	if buffer == 0 {
		buffer = DefaultSubscriberBuffer
	}
	sub := &Subscription{e: e, ch: make(chan Event, buffer+len(replay))}
	for _, x := range replay {
		sub.ch <- x
	}
	s.subs = append(s.subs, sub)
	ev.reply <- subscribed{sub, nil}
}

type unsubscribeEvent struct {
	sub   *Subscription
	reply chan struct{}
}

func (ev unsubscribeEvent) apply(e *Engine) {
	e.svc.subs = dropSub(e.svc.subs, ev.sub)
	ev.sub.end(nil)
	ev.reply <- struct{}{}
}

// end closes the subscription's channel, once, saying why. On the loop.
func (s *Subscription) end(why error) {
	if s.dropped {
		return
	}
	s.dropped = true
	s.mu.Lock()
	s.err = why
	s.mu.Unlock()
	close(s.ch)
}

func dropSub(subs []*Subscription, s *Subscription) []*Subscription {
	for i, x := range subs {
		if x == s {
			return append(subs[:i], subs[i+1:]...)
		}
	}
	return subs
}

// publish numbers a committed event and hands it to the observer, the
// history and every subscriber; a subscriber with no room is dropped. It
// then lets the waiters and retirement know of a task that finished.
func (e *Engine) publish(ev Event) {
	s := &e.svc
	s.seq++
	ev.Seq = s.seq
	if e.cfg.Observer != nil {
		e.cfg.Observer(ev)
	}
	if s.ring == nil {
		s.ring = make([]Event, EventHistory)
	}
	s.ring[s.seq%uint64(len(s.ring))] = ev
	kept := s.subs[:0]
	for _, sub := range s.subs {
		select {
		case sub.ch <- ev:
			kept = append(kept, sub)
		default:
			sub.end(fmt.Errorf("%w: %d events unread when event %d was published", ErrSlowSubscriber, len(sub.ch), ev.Seq))
		}
	}
	clear(s.subs[len(kept):])
	s.subs = kept
	switch ev.Kind {
	case Completed, Failed, TaskCancelled, TaskBlocked:
		if n := e.node(ev.TaskID); n != nil && n.rec.State.Terminal() {
			e.settled(n)
		}
	case Started, Retrying, DeliveryFailed, CardQuarantined, GPUUnknown, GPUKnown, Adopted, JobChanged:
	}
}

// closeService ends the subscriptions when the loop ends. (Waiters see the
// engine closed.)
func (e *Engine) closeService() {
	for _, sub := range e.svc.subs {
		sub.end(ErrClosed)
	}
	e.svc.subs = nil
}
