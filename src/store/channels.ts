/** LISTEN/NOTIFY channels. Notifications are latency hints only: every listener also polls. */

/** Work became due (payload: the task name). Workers listen. */
export const CHANNEL_WORK = 'stepwise_work';
/** An execution changed status (payload: comma-separated ids). API servers' long-polls listen. */
export const CHANNEL_CHANGED = 'stepwise_changed';
/** An execution was cancelled (payload: its id). Workers listen, to abort a running handler. */
export const CHANNEL_CANCEL = 'stepwise_cancel';
/** A task's registration (its schemas) changed (payload: its name). API servers listen, to drop cached validators. */
export const CHANNEL_TASKS = 'stepwise_tasks';
