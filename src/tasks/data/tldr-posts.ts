// Short Reddit-style posts in the manner of trl-lib/tldr (written for this project), for the offline TLDR tasks.
import type { Item } from "../../rollout/types.js";

export const tldrPosts: Item[] = [
  {"prompt": "My roommate keeps eating my food even after I labeled everything. I asked politely twice and he apologized but it keeps happening. Should I buy a mini fridge with a lock or talk to our landlord?"},
  {"prompt": "I got a job offer with higher pay but a much longer commute. My current team is great and I am learning a lot. I can't decide if the money is worth two extra hours every day."},
  {"prompt": "My friend borrowed a large amount of money six months ago and has not mentioned it since. I don't want to ruin the friendship but I need the money back for rent."},
  {"prompt": "I started running three months ago and my knees hurt after long runs. I stretch before running and my shoes are new. I am not sure whether to rest or push through."},
  {"prompt": "Our neighbours play loud music every night until 2am. We left a note and they turned it down for a day, then it went back to normal."},
  {"prompt": "I want to switch careers from accounting to software development at 35. I have been learning to code at night for a year and built a few small projects."},
  {"prompt": "My sister wants me to be the maid of honor but she lives across the country and the wedding planning is all in person."},
  {"prompt": "I adopted a rescue dog who is scared of everyone except me. Visitors make him hide for hours and he barks at people on walks."},
  {"prompt": "I have been at my company for four years and just found out a new hire with less experience earns more than me. My reviews have all been strong. I am thinking about asking for a raise but I am worried it will look petty."},
  {"prompt": "My parents want me to move back home to save money while I finish my degree. I like my independence and my part-time job covers most of my rent, but my savings are almost gone."},
  {"prompt": "I bought a used car two weeks ago and the check engine light came on. The dealer says the warranty does not cover it because it is a sensor issue. The repair quote is almost a month of my salary."},
  {"prompt": "My best friend and I planned a trip together for a year. Last week she told me her new boyfriend is coming too and she already booked his ticket without asking me."},
];
