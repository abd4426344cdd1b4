// Preloaded (`node --expose-gc -r`) into the process a benchmark measures, never into the product:
// on the IPC message 'memory' it collects garbage and answers with process.memoryUsage() and the RSS
// after that collection, so a benchmark can tell what is live from what was merely not yet collected.
// With it come V8's heap spaces (memory each holds in RAM), to tell the heap's slack (a young
// generation grown by a burst of allocation) from memory outside the heap.
'use strict';
const v8 = require('node:v8');
if (process.send && typeof global.gc === 'function') {
  process.on('message', (message) => {
    if (message !== 'memory') return;
    // Twice: the first collection's finalizers may free more.
    global.gc();
    global.gc();
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, physical: s.physical_space_size }]));
    process.send({ memory: process.memoryUsage(), spaces });
  });
  // The channel must not keep the measured process alive by itself.
  process.channel?.unref();
}
