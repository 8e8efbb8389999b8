package runtime

import "context"

const opReopenContainerLog = "reopen_container_log"

// ReopenContainerLog asks the runtime to reopen the log file of a running
// container at its log path, e.g. after the file was renamed by log rotation.
func (r *Runtime) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer r.record(opReopenContainerLog, r.clock.Now(), &err)
	if err := r.rs.ReopenContainerLog(ctx, id); err != nil {
		return wrap(err, "reopen log of container %s", id)
	}
	return nil
}
