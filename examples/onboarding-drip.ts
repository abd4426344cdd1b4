import { defineTask, Type } from 'stepwise-workflows';

/**
 * A new user gets a welcome email at once, a tips email after a pause and a check-in after another.
 * Each send is a step (never sent twice, even across crashes); each pause is a durable sleep that frees
 * the worker. `gap` makes the demo quick: '5s' here, '2d' in real life.
 *
 *   curl -X POST localhost:8080/api/v1/executions -H 'content-type: application/json' \
 *     -d '{"task":"onboarding-drip","data":{"email":"ada@example.com","name":"Ada","gap":"5s"}}'
 */
export const onboardingDrip = defineTask({
  name: 'onboarding-drip',
  data: Type.Object(
    {
      email: Type.String({ format: 'email' }),
      name: Type.String({ minLength: 1 }),
      gap: Type.Optional(Type.String({ default: '5s', description: 'pause between emails' })),
    },
    { additionalProperties: false },
  ),
  async run(ctx, user) {
    const gap = user.gap ?? '5s';
    const sent: string[] = [];
    const send = (template: string) =>
      ctx.step(`send-${template}`, () => {
        ctx.log.info({ template }, 'email sent');
        return { template, to: user.email, at: new Date().toISOString() };
      });
    sent.push((await send('welcome')).template);
    await ctx.sleep('wait-before-tips', gap);
    sent.push((await send('tips')).template);
    await ctx.sleep('wait-before-check-in', gap);
    sent.push((await send('check-in')).template);
    return { email: user.email, sent };
  },
});
