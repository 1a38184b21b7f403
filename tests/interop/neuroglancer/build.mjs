// Bundles the neuroglancer viewer of the npm package `neuroglancer` (a library: ES modules, no built
// viewer) into OUTDIR with esbuild, for tests/interop/neuroglancer_test.py: main.bundle.js and .css,
// the two worker bundles the library loads by `new URL("./<name>.bundle.js", import.meta.url)` (so
// they sit beside the main bundle), and an index.html. Takes about 2 s.
//
// Two things neuroglancer's own build (vite-style) provides are done here: `import x from "...svg?raw"`
// (an icon's text) is loaded as text, and an icon the registry's ikonate 1.1.1 lacks (the package.json
// override stands in for a GitHub commit npm cannot fetch here) is drawn blank: icons do not touch data.
// Omits: the wasm decoders (png, jxl, compresso, draco meshes), which the test's volumes do not use.
//
// usage: node tests/interop/neuroglancer/build.mjs OUTDIR
import * as esbuild from 'esbuild';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const lib = path.join(here, 'node_modules', 'neuroglancer', 'lib');
const out = process.argv[2];
if (!out) {
  console.error('usage: node build.mjs OUTDIR');
  process.exit(2);
}

const BLANK_ICON = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"></svg>';

const rawText = {
  name: 'raw-text',
  setup(build) {
    build.onResolve({ filter: /\?raw$/ }, (args) => {
      const bare = args.path.slice(0, -'?raw'.length);
      const file = bare.startsWith('.') ? path.join(args.resolveDir, bare)
                                        : path.join(here, 'node_modules', bare);
      return { path: file, namespace: 'raw-text' };
    });
    build.onLoad({ filter: /.*/, namespace: 'raw-text' }, async (args) => {
      let contents;
      try {
        contents = await readFile(args.path, 'utf8');
      } catch {
        if (!args.path.endsWith('.svg')) throw new Error(`cannot read ${args.path}`);
        contents = BLANK_ICON;
      }
      return { contents, loader: 'text' };
    });
  },
};

await esbuild.build({
  entryPoints: ['main.bundle.js', 'chunk_worker.bundle.js', 'async_computation.bundle.js']
    .map((f) => path.join(lib, f)),
  bundle: true,
  format: 'esm',
  outdir: out,
  minify: true,
  plugins: [rawText],
  loader: { '.wasm': 'file', '.svg': 'file' },
  assetNames: '[name]',
  logLevel: 'warning',
});
await writeFile(path.join(out, 'index.html'),
  '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>neuroglancer</title>' +
  '<link rel="stylesheet" href="main.bundle.css"></head>\n' +
  '<body><script type="module" src="main.bundle.js"></script></body></html>\n');
