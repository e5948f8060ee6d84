package train

// ForgetWritten drops the sample-id sets this process has loaded, so that
// the next run reads them from the files again, as a new process would.
func ForgetWritten() {
	writtenMu.Lock()
	defer writtenMu.Unlock()
	writtenBy = map[string]*written{}
}
