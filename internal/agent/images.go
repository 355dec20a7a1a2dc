package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// imageLoad is one archive on its way into the host's engine: the chunks
// are written into a pipe that the engine's load reads.
type imageLoad struct {
	pw   *io.PipeWriter
	done chan error
	want []Image
	once sync.Once
}

func (l *imageLoad) abort() {
	l.once.Do(func() { l.pw.CloseWithError(errors.New("the session ended")) })
}

func (s *session) images(ctx context.Context) (Images, error) {
	s.mu.Lock()
	derr := s.dockerErr
	s.mu.Unlock()
	if derr != nil {
		return nil, &Error{Code: CodeNoEngine, Message: fmt.Sprintf("no Docker engine on this host: %v", derr)}
	}
	if s.opt.Images == nil {
		return nil, &Error{Code: CodeNoEngine, Message: "this agent loads no images"}
	}
	return s.opt.Images(ctx)
}

func (s *session) imagesMissing(ctx context.Context, p ImagesParams) outcome {
	im, err := s.images(ctx)
	if err != nil {
		return fail(err)
	}
	missing, err := im.Missing(ctx, p.Images)
	if err != nil {
		return fail(err)
	}
	return ok(ImagesMissing{Missing: missing})
}

// imageChunk feeds one chunk of a stream; the first (the one naming the
// images) starts the load, the last (Done) waits for it and checks that
// every image arrived. The session answers chunks one at a time in the
// order they came (loop), so they arrive in order. A chunk of a stream
// that is not loading, after an earlier one failed, is refused rather
// than taken for the start of another archive.
func (s *session) imageChunk(ctx context.Context, c ImageChunk) outcome {
	if c.Stream == "" {
		return fail(&Error{Code: CodeBadParams, Message: "image chunk without a stream"})
	}
	s.mu.Lock()
	l := s.loads[c.Stream]
	s.mu.Unlock()
	if l == nil && len(c.Images) == 0 {
		return fail(&Error{Code: CodeBadParams, Message: fmt.Sprintf("image stream %s: a chunk with no load under way (an earlier chunk failed, or the first named no image)", c.Stream)})
	}
	if l == nil {
		im, err := s.images(ctx)
		if err != nil {
			return fail(err)
		}
		pr, pw := io.Pipe()
		l = &imageLoad{pw: pw, done: make(chan error, 1), want: c.Images}
		go func() {
			err := im.Load(s.ctx, pr)
			pr.CloseWithError(errors.Join(err, errors.New("the engine stopped reading")))
			l.done <- err
		}()
		s.mu.Lock()
		s.loads[c.Stream] = l
		s.mu.Unlock()
	}
	if len(c.Data) > 0 {
		if _, err := l.pw.Write(c.Data); err != nil {
			s.dropLoad(c.Stream, l)
			return fail(fmt.Errorf("load images: %w", err))
		}
	}
	if !c.Done {
		return ok(nil)
	}
	l.once.Do(func() { l.pw.Close() })
	err := <-l.done
	s.dropLoad(c.Stream, nil)
	if err != nil {
		return fail(fmt.Errorf("load images: %w", err))
	}
	return s.arrived(ctx, l.want)
}

// arrived says which of want the engine has after a load, failing when
// one did not arrive with its ID.
func (s *session) arrived(ctx context.Context, want []Image) outcome {
	im, err := s.images(ctx)
	if err != nil {
		return fail(err)
	}
	still, err := im.Missing(ctx, want)
	if err != nil {
		return fail(err)
	}
	if len(still) > 0 {
		return fail(fmt.Errorf("load images: %s did not arrive with its ID", still[0].ID))
	}
	var loaded []string
	for _, i := range want {
		loaded = append(loaded, i.ID)
	}
	return ok(ImageLoaded{Loaded: loaded})
}

func (s *session) dropLoad(stream string, abort *imageLoad) {
	s.mu.Lock()
	delete(s.loads, stream)
	s.mu.Unlock()
	if abort != nil {
		abort.abort()
	}
}
