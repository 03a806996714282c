// Creative prompts for the story length-ratio task (CoMLRL's quick-start).
import type { Item } from "../../rollout/types.js";

export const storyPrompts: Item[] = [
  {"prompt": "Write a story about a lighthouse keeper who finds a message in a bottle."},
  {"prompt": "Write a story about a robot learning to paint."},
  {"prompt": "Write a story about a dragon afraid of heights."},
  {"prompt": "Write a story about a lost umbrella."},
  {"prompt": "Write a story about the last tree in a city."},
  {"prompt": "Write a story about a chef who cannot taste."},
  {"prompt": "Write a story about a train that never stops."},
  {"prompt": "Write a story about two rival bakers."},
  {"prompt": "Write a story about a cat who runs a library."},
  {"prompt": "Write a story about a storm at sea."},
  {"prompt": "Write a story about a clock that runs backwards."},
  {"prompt": "Write a story about a garden on the moon."},
  {"prompt": "Write a story about a shy ghost."},
  {"prompt": "Write a story about a letter delivered fifty years late."},
  {"prompt": "Write a story about a map with a missing island."},
  {"prompt": "Write a story about a musician who hears colors."},
];
