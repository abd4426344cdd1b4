// Preloaded (`node --expose-gc -r`) into the process a benchmark measures, never into the product:
// on the IPC message 'memory' it collects garbage and answers with process.memoryUsage() and the RSS
// after that collection, so a benchmark can tell what is live from what was merely not yet collected.
'use strict';
if (process.send && typeof global.gc === 'function') {
  process.on('message', (message) => {
    if (message !== 'memory') return;
    // Twice: the first collection's finalizers may free more.
    global.gc();
    global.gc();
    process.send({ memory: process.memoryUsage() });
  });
  // The channel must not keep the measured process alive by itself.
  process.channel?.unref();
}
