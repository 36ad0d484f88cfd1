package ordo

// WaitAsync returns a channel that receives the result of Wait(v) (nil or an *Error) once every
// op pushed on v before the call has completed, and is then closed. It never blocks.
func (e *Engine) WaitAsync(v *Var) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ch <- e.Wait(v)
		close(ch)
	}()
	return ch
}
