import { defineTask } from '../../src/index';

/** The tasks `make scale` (scripts/scale.ts) drains: a no-op, and three steps that return at once. */
export const noop = defineTask({ name: 'scale-noop', run: async () => null });

export const steps = defineTask({
  name: 'scale-steps',
  async run(ctx) {
    await ctx.step('one', () => 1);
    await ctx.step('two', () => 2);
    return ctx.step('three', () => 3);
  },
});
