// The extension's answer to `read_notebook` for a 500-cell notebook with big
// outputs: the median time of notebookView plus JSON.stringify, and its size.
//
// Run: node bench/read_notebook_frontend.mjs (after `jlpm build:lib` in labextension)
// Prints "median_ms <ms>", "answer_bytes <bytes>" and the cell counts, one a line.
import { readFileSync } from "node:fs";

const CELLS = 500;
const RUNS = 20;
const SOURCE_CHARS = 2000;
const STREAM_BYTES = 100 * 1024;
const IMAGE_BYTES = 200 * 1024;

// lib/ holds ES modules in a package without "type": "module"; loading the
// module's text as a data URL avoids node's module-type guess. It has no imports.
const libPath = new URL("../labextension/lib/notebookview.js", import.meta.url);
const code = readFileSync(libPath, "utf8");
const { notebookView } = await import(
  `data:text/javascript;base64,${Buffer.from(code).toString("base64")}`
);

function base64Image(bytes) {
  const raw = Buffer.alloc((bytes * 3) / 4);
  for (let i = 0; i < raw.length; i++) {
    raw[i] = (i * 2654435761) >>> 24;
  }
  return raw.toString("base64");
}

function buildNotebook() {
  const image = base64Image(IMAGE_BYTES);
  const line = "epoch 12: loss=0.03125 accuracy=0.98828 lr=0.000100\n";
  const lines = Array.from(
    { length: Math.ceil(STREAM_BYTES / line.length) },
    () => line,
  );
  const cells = [];
  for (let i = 0; i < CELLS; i++) {
    const source = `# cell ${i}\n`.padEnd(SOURCE_CHARS, "x = compute(x) + 1\n");
    cells.push({
      id: `cell-${i}`,
      cell_type: "code",
      source,
      metadata: i % 10 === 0 ? { qloop: { status: "completed" } } : {},
      execution_count: i + 1,
      outputs: [
        { output_type: "stream", name: "stdout", text: lines },
        {
          output_type: "display_data",
          data: {
            "image/png": image,
            "text/plain": "<Figure size 640x480 with 1 Axes>",
          },
          metadata: {},
        },
      ],
    });
  }
  return { cells, image };
}

const { cells, image } = buildNotebook();
let answer = "";
const times = [];
for (let run = 0; run <= RUNS; run++) {
  const start = process.hrtime.bigint();
  answer = JSON.stringify(notebookView("bench.ipynb", cells, null, true));
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (run > 0) {
    times.push(ms); // the first run warms the JIT up
  }
}
times.sort((a, b) => a - b);
const median = (times[(RUNS - 1) >> 1] + times[RUNS >> 1]) / 2;
const view = JSON.parse(answer);
console.log(`median_ms ${median.toFixed(3)}`);
console.log(`answer_bytes ${Buffer.byteLength(answer, "utf8")}`);
console.log(`cells ${view.cells.length}`);
console.log(
  `cells_omitted ${view.cells.filter((cell) => cell.omitted).length}`,
);
console.log(
  `image_data_in_answer ${answer.includes(image.slice(0, 64)) ? 1 : 0}`,
);
