package engine

import "context"

// Observe starts the observation of one unit of work with start (an
// Observer's Deliver, an InboxObserver's ProcessInbox), guarded: the work
// must go on whatever the observation does. A panic in start, or in the
// end it returned, is given to panicked and not passed on (the work then
// goes on unobserved); a nil context from start is ctx, a nil end none.
// The end returned is never nil.
func Observe[R any](ctx context.Context, start func(context.Context) (context.Context, func(R)), panicked func(v any)) (context.Context, func(R)) {
	octx, end := func() (octx context.Context, end func(R)) {
		defer func() {
			if v := recover(); v != nil {
				panicked(v)
				octx, end = nil, nil
			}
		}()
		return start(ctx)
	}()
	if octx == nil {
		octx = ctx
	}
	if end == nil {
		return octx, func(R) {}
	}
	return octx, func(r R) {
		defer func() {
			if v := recover(); v != nil {
				panicked(v)
			}
		}()
		end(r)
	}
}
