// Draws the objectives study's curves (docs/objectives-study.md) from its data files: for each task, the mean train
// reward per epoch of every objective, averaged over its seeds, with the best one writer can reach alone.
//   npx tsx scripts/study/objectives-plot.ts [--data docs/data] [--out docs/objectives-study]
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { writeLineChartSvg } from "../../src/index.js";

interface StudyData {
  title: string;
  soloCeiling: number;
  curves: { objective: string; seeds: { seed: number; epochRewards: number[] }[] }[];
}

const { values } = parseArgs({ options: { data: { type: "string", default: "docs/data" }, out: { type: "string", default: "docs/objectives-study" } } });

for (const task of ["demo", "relay"]) {
  const file = path.join(values.data!, `objectives-study-${task}.json`);
  const data = JSON.parse(readFileSync(file, "utf8")) as StudyData;
  const series = data.curves.map(({ objective, seeds }) => ({
    name: objective,
    points: seeds[0].epochRewards.map((_, epoch) => [epoch + 1, seeds.reduce((sum, s) => sum + s.epochRewards[epoch], 0) / seeds.length] as [number, number]),
  }));
  const svg = path.join(values.out!, `${task}.svg`);
  await writeLineChartSvg(svg, series, {
    title: `${data.title} — mean over seeds`,
    xLabel: "epoch",
    yLabel: "mean train reward",
    yMin: 0,
    yMax: 1,
    width: 760,
    references: [{ y: data.soloCeiling, label: "one writer alone" }],
  });
  console.log(`wrote ${svg}`);
}
