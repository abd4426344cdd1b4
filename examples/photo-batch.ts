import { defineTask, Type } from 'stepwise-workflows';

/** One photo: a child of photo-batch, though clients may schedule it on its own too. */
export const resizePhoto = defineTask({
  name: 'resize-photo',
  data: Type.Object({ url: Type.String(), width: Type.Integer({ minimum: 16, maximum: 4096 }) }, { additionalProperties: false }),
  async run(ctx, data) {
    // A (simulated) image service call, recorded once.
    return ctx.step('resize', () => ({ url: `${data.url}?w=${data.width}`, bytes: 1000 + data.url.length * 10 }));
  },
});

/**
 * Fans out: one child execution per photo, run at once by any workers, then the total. The batch
 * waits without holding a worker slot, and a crash or retry never starts a photo twice.
 *
 *   curl -X POST localhost:8080/api/v1/executions -H 'content-type: application/json' \
 *     -d '{"task":"photo-batch","data":{"urls":["/a.jpg","/b.jpg","/c.jpg"],"width":320}}'
 *   curl 'localhost:8080/api/v1/executions?parent_execution_id=<its execution_id>'   # the three children
 */
export const photoBatch = defineTask({
  name: 'photo-batch',
  data: Type.Object({ urls: Type.Array(Type.String(), { minItems: 1, maxItems: 100 }), width: Type.Integer({ minimum: 16, maximum: 4096 }) }, { additionalProperties: false }),
  async run(ctx, data) {
    const resized = await Promise.all(data.urls.map((url, i) => ctx.invoke(`photo-${i}`, resizePhoto, { url, width: data.width })));
    return { photos: resized.length, bytes: resized.reduce((sum, r) => sum + r.bytes, 0) };
  },
});
