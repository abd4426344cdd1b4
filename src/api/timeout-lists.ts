/**
 * Timeouts kept in one list per duration, with one Node timer per list instead of one per entry: a
 * Timeout object and its callback per long-poll add up over 10,000 of them, while their durations
 * are few (timeout=30, timeout=300...). Entries of one duration expire in the order they were added,
 * which is also the order of their deadlines, so a list needs a timer only for its oldest entry;
 * removing an entry is a Map delete. The same design as Node's own timer lists, minus the per-entry
 * objects.
 */
export class TimeoutLists<T> {
  private readonly lists = new Map<number, TimeoutList<T>>();

  /** @param expire called once for each entry whose timeout passes before it is removed */
  constructor(private readonly expire: (entry: T) => void) {}

  /** Expires `entry` after `ms` unless it is removed first. An entry is in at most one list at a time. */
  add(entry: T, ms: number): void {
    let list = this.lists.get(ms);
    if (!list) this.lists.set(ms, (list = { deadlines: new Map(), timer: undefined }));
    list.deadlines.set(entry, performance.now() + ms);
    if (!list.timer) this.arm(ms, list, ms);
  }

  /** Forgets `entry` (added with `ms`); a list left empty stops its timer. */
  delete(entry: T, ms: number): void {
    const list = this.lists.get(ms);
    if (!list || !list.deadlines.delete(entry) || list.deadlines.size > 0) return;
    clearTimeout(list.timer);
    this.lists.delete(ms);
  }

  /** Entries waiting for their timeout (for tests). */
  get size(): number {
    let n = 0;
    for (const list of this.lists.values()) n += list.deadlines.size;
    return n;
  }

  /** (Re)starts the list's one timer: an entry added by an `expire` callback may have started it already. */
  private arm(ms: number, list: TimeoutList<T>, delay: number): void {
    clearTimeout(list.timer);
    list.timer = setTimeout(() => this.fire(ms, list), delay);
  }

  /**
   * Expires the entries that are due. A removed head leaves the timer armed for its deadline, so a
   * firing may find none due: it re-arms for the new head (at most one early wake-up per removal).
   */
  private fire(ms: number, list: TimeoutList<T>): void {
    list.timer = undefined;
    const now = performance.now();
    for (const [entry, deadline] of list.deadlines) {
      if (deadline > now) {
        // Node's timers count whole milliseconds from the loop's cached clock: never re-arm for 0.
        this.arm(ms, list, Math.max(1, Math.ceil(deadline - now)));
        return;
      }
      list.deadlines.delete(entry);
      this.expire(entry);
    }
    if (list.deadlines.size === 0 && this.lists.get(ms) === list) this.lists.delete(ms);
  }
}

interface TimeoutList<T> {
  /** Insertion order, which is deadline order: every entry of the list has the same duration. */
  deadlines: Map<T, number>;
  timer: NodeJS.Timeout | undefined;
}
