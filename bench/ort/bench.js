// Times ONNX Runtime's CPU provider on a model as `tofuc bench --json`
// does: one warm-up run, then RUNS runs; prints the same JSON fields.
// Inputs are arange(n)/n (their values do not change the time).
// Usage: node bench.js MODEL.onnx [RUNS] [THREADS]
const ort = require('onnxruntime-node');

async function main() {
  const model = process.argv[2];
  const runs = +(process.argv[3] || 10);
  const threads = +(process.argv[4] || 2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = (session.inputMetadata || []).find(m => m.name === name);
    const dims = meta && meta.shape ? meta.shape.map(d => (typeof d === 'number' && d > 0 ? d : 1)) : [1, 3, 224, 224];
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = i / n;
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  await session.run(feeds);
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    model, backend: 'onnxruntime', threads, runs,
    median_seconds: times[Math.floor(times.length / 2)], min_seconds: times[0], kernels: [],
  }));
}

main().catch(e => { console.error(e.message || e); process.exit(1); });
