#!/usr/bin/env node
// Turns the unpacked npm package `zipcodes` into the compact TSV that
// dropslot embeds (crates/dropslot-core/data/postal-codes.tsv). Called by
// derive-geodata.sh: `node derive-geodata.js <unpacked package dir> <version>`;
// writes the TSV to stdout and a summary to stderr.
'use strict';

const path = require('path');

const [pkgDir, expectedVersion] = process.argv.slice(2);
if (!pkgDir || !expectedVersion) {
    fail('usage: derive-geodata.js <unpacked zipcodes package dir> <version>');
}

function fail(msg) {
    process.stderr.write(`derive-geodata: ${msg}\n`);
    process.exit(1);
}

const pkg = require(path.join(pkgDir, 'package.json'));
if (pkg.name !== 'zipcodes' || pkg.version !== expectedVersion) {
    fail(`expected zipcodes@${expectedVersion}, found ${pkg.name}@${pkg.version}`);
}

// The lib files only assign plain data to `exports`; load them directly
// rather than through index.js, which also merges the two tables.
const us = require(path.join(pkgDir, 'lib', 'codes.js')).codes;
const ca = require(path.join(pkgDir, 'lib', 'codesCanada.js')).codes;

// The package spells Canadian provinces out, including two non-standard
// territory names.
const PROVINCES = {
    'Alberta': 'AB',
    'British Columbia': 'BC',
    'Manitoba': 'MB',
    'New Brunswick': 'NB',
    'Newfoundland and Labrador': 'NL',
    'Northwest Territory': 'NT',
    'Northwest Territories': 'NT',
    'Nova Scotia': 'NS',
    'Nunavut': 'NU',
    'Nunavut Territory': 'NU',
    'Ontario': 'ON',
    'Prince Edward Island': 'PE',
    'Quebec': 'QC',
    'Saskatchewan': 'SK',
    'Yukon': 'YT',
    'Yukon Territory': 'YT',
};

// An FSA's first letter fixes its province (X is shared by NT and NU), so it
// cross-checks the name mapping above.
const FSA_LETTER = {
    A: ['NL'], B: ['NS'], C: ['PE'], E: ['NB'], G: ['QC'], H: ['QC'], J: ['QC'],
    K: ['ON'], L: ['ON'], M: ['ON'], N: ['ON'], P: ['ON'], R: ['MB'], S: ['SK'],
    T: ['AB'], V: ['BC'], X: ['NT', 'NU'], Y: ['YT'],
};

// The package's Canadian source was read with the wrong encoding, so every
// accented letter became U+FFFD. These are the affected word fragments in
// 8.0.0, restored by hand; more specific fragments come before the ones they
// contain ("ad\uFFFDle" before "\uFFFDle"). Anything left over fails the run so
// that a version bump gets looked at.
const R = '\uFFFD';
const ACCENT_FIXES = [
    [`Cap-pel${R}`, 'Cap-pelé'],
    [`Lam${R}que`, 'Lamèque'],
    [`H${R}bert`, 'Hébert'],
    [`A${R}ores`, 'Açores'],
    [`Gasp${R}`, 'Gaspé'],
    [`vall${R}e`, 'vallée'],
    [`C${R}te`, 'Côte'],
    [`trinit${R}`, 'trinité'],
    [`R${R}gion`, 'Région'],
    [`Chaudi${R}re`, 'Chaudière'],
    [`Qu${R}bec`, 'Québec'],
    [`val${R}re`, 'valère'],
    [`Pocati${R}re`, 'Pocatière'],
    [`${R}mile`, 'Émile'],
    [`b${R}lair`, 'bélair'],
    [`L${R}vis`, 'Lévis'],
    [`Laterri${R}re`, 'Laterrière'],
    [`Jonqui${R}re`, 'Jonquière'],
    [`M${R}tabetchouan`, 'Métabetchouan'],
    [`f${R}licien`, 'félicien'],
    [`ivi${R}re`, 'ivière'],
    [`m${R}re`, 'mère'],
    [`l${R}onard`, 'léonard'],
    [`h${R}l${R}ne`, 'hélène'],
    [`gr${R}ce`, 'grâce'],
    [`${R}mard`, 'Émard'],
    [`fran${R}ois`, 'françois'],
    [`doroth${R}e`, 'dorothée'],
    [`genevi${R}ve`, 'geneviève'],
    [`Mont${R}r${R}gie`, 'Montérégie'],
    [`Lanaudi${R}re`, 'Lanaudière'],
    [`pr${R}vost`, 'prévost'],
    [`ch${R}n${R}ville`, 'chénéville'],
    [`T${R}miscamingue`, 'Témiscamingue'],
    [`j${R}r${R}me`, 'jérôme'],
    [`${R}piphanie`, 'Épiphanie'],
    [`Ch${R}teauguay`, 'Châteauguay'],
    [`th${R}r${R}se`, 'thérèse'],
    [`ad${R}le`, 'adèle'],
    [`${R}le`, 'Île'],
];

function fixAccents(city) {
    let out = city;
    for (const [bad, good] of ACCENT_FIXES) {
        out = out.split(bad).join(good);
    }
    return out;
}

// JS prints these numbers in shortest round-trip form, which for this
// package is already at most 4 decimals with trailing zeros trimmed.
function coord(n, what, key) {
    const s = String(n);
    if (!/^-?\d{1,3}(\.\d{1,4})?$/.test(s)) {
        fail(`${key}: ${what} ${s} is not a decimal with at most 4 places`);
    }
    return s;
}

function hasCoords(o) {
    return typeof o.latitude === 'number' && typeof o.longitude === 'number'
        && Number.isFinite(o.latitude) && Number.isFinite(o.longitude)
        // 0,0 is the package's placeholder for military APO/FPO/DPO ZIPs.
        && !(o.latitude === 0 && o.longitude === 0)
        && Math.abs(o.latitude) <= 90 && Math.abs(o.longitude) <= 180;
}

function cleanText(s, key) {
    if (/[\t\r\n]/.test(s) || s.trim() === '') fail(`${key}: unusable text ${JSON.stringify(s)}`);
    return s.trim();
}

// H0H is Canada Post's "Reserved (santa Claus)" FSA, placed at the North
// Pole: not a delivery area, and a pin at 90,0 would only skew distances.
const RESERVED_FSAS = new Set(['H0H']);

const rows = [];
const dropped = { caNoCoords: [], caReserved: [], usNoCoords: 0 };

for (const [key, o] of Object.entries(ca)) {
    if (!/^[ABCEGHJKLMNPRSTVXY][0-9][ABCEGHJKLMNPRSTVWXYZ]$/.test(key) || o.zip !== key) {
        fail(`unexpected Canadian key ${key}`);
    }
    if (RESERVED_FSAS.has(key)) {
        dropped.caReserved.push(key);
        continue;
    }
    // The package's own CSV import split on commas, shifting columns for a
    // few FSAs; those rows lost their latitude (and their province).
    if (!hasCoords(o)) {
        dropped.caNoCoords.push(key);
        continue;
    }
    const region = PROVINCES[o.state];
    if (!region) fail(`${key}: unknown province ${JSON.stringify(o.state)}`);
    if (!FSA_LETTER[key[0]].includes(region)) fail(`${key}: province ${region} contradicts the FSA`);
    const city = fixAccents(cleanText(o.city, key));
    if (city.includes(R)) fail(`${key}: unrepaired U+FFFD in ${JSON.stringify(city)}`);
    rows.push(['CA', key, coord(o.latitude, 'lat', key), coord(o.longitude, 'lng', key), city, region]);
}

for (const [key, o] of Object.entries(us)) {
    if (!/^[0-9]{5}$/.test(key) || o.zip !== key) fail(`unexpected US key ${key}`);
    if (!hasCoords(o)) {
        dropped.usNoCoords += 1;
        continue;
    }
    if (!/^[A-Z]{2}$/.test(o.state)) fail(`${key}: state ${JSON.stringify(o.state)} is not a code`);
    const city = cleanText(o.city, key);
    if (city.includes(R)) fail(`${key}: U+FFFD in ${JSON.stringify(city)}`);
    rows.push(['US', key, coord(o.latitude, 'lat', key), coord(o.longitude, 'lng', key), city, o.state]);
}

// Object keys are already unique, but the brief is "first row per code wins",
// so keep that rule explicit should the source format change.
const seen = new Set();
let duplicates = 0;
const unique = rows.filter((r) => {
    const k = `${r[0]}\t${r[1]}`;
    if (seen.has(k)) {
        duplicates += 1;
        return false;
    }
    seen.add(k);
    return true;
});

const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
unique.sort((a, b) => cmp(a[0], b[0]) || cmp(a[1], b[1]));

const lines = ['country\tcode\tlat\tlng\tcity\tregion', ...unique.map((r) => r.join('\t'))];
process.stdout.write(lines.join('\n') + '\n');

const count = (c) => unique.filter((r) => r[0] === c).length;
process.stderr.write(
    `derive-geodata: zipcodes@${pkg.version}: CA ${count('CA')} rows, US ${count('US')} rows; `
    + `dropped ${dropped.caNoCoords.length} CA without coordinates (${dropped.caNoCoords.join(' ')}), `
    + `${dropped.caReserved.length} CA reserved (${dropped.caReserved.join(' ')}), `
    + `${dropped.usNoCoords} US at 0,0; ${duplicates} duplicates\n`,
);
