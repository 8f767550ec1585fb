import { defineConfig } from "tsup";

export default defineConfig({
  entry: { mod: "mod.ts" },
  format: ["esm"],
  dts: true,
  clean: true,
  target: "es2022",
  sourcemap: true,
});
