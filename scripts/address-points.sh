#!/usr/bin/env bash
# Writes address points for `dropslot addresses import` (CONTRACT §11) to stdout: a few real
# Toronto landmarks, then points generated around the postal-code locations of the shipped
# dataset (crates/dropslot-core/data/postal-codes.tsv).
#
#   scripts/address-points.sh                         # the shipped sample (Toronto, M FSAs)
#   scripts/address-points.sh --prefix '' --count 1000000 --format geojson > /tmp/1m.geojsonl
#
# Options:
#   --prefix P    postal codes starting with P (default M: Toronto's FSAs; '' = every code)
#   --count N     generated points, spread evenly over those codes (default 2040: 20 a Toronto FSA)
#   --format F    csv (default) or geojson (OpenAddresses GeoJSON lines)
#
# The landmarks are public facts (a building's street address and where it stands, to about
# 10 m). The generated points are invented: street names from a fixed list, numbers counting
# up, each placed up to about 1.3 km from its postal code's location by a fixed pseudo-random
# sequence, so a rerun writes the same file byte for byte. The shipped sample is
# crates/dropslot-core/data/address-points-sample.csv, made by this script with no options.
set -euo pipefail

prefix=M
count=2040
format=csv
while (($#)); do
    case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --format) format="$2"; shift 2 ;;
    *) echo "usage: $0 [--prefix P] [--count N] [--format csv|geojson]" >&2; exit 2 ;;
    esac
done
[[ "$format" == csv || "$format" == geojson ]] || { echo "--format: csv or geojson" >&2; exit 2; }
[[ "$count" =~ ^[0-9]+$ ]] || { echo "--count: a number" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dataset="$root/crates/dropslot-core/data/postal-codes.tsv"

LC_ALL=C awk -F'\t' -v prefix="$prefix" -v count="$count" -v format="$format" '
function csv(s) { gsub(/"/, "\"\"", s); return (s ~ /[",]/) ? "\"" s "\"" : s }
function js(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
function emit(number, street, unit, city, postal, lat, lng) {
    if (format == "csv") {
        printf "%s,%s,%s,%s,%s,%.6f,%.6f\n", number, csv(street), csv(unit), csv(city), postal, lat, lng
    } else {
        printf "{\"type\":\"Feature\",\"properties\":{\"number\":%s,\"street\":%s,\"unit\":%s,\"city\":%s,\"postcode\":%s},\"geometry\":{\"type\":\"Point\",\"coordinates\":[%.6f,%.6f]}}\n", js(number), js(street), js(unit), js(city), js(postal), lng, lat
    }
}
# A linear congruential sequence (glibc constants): the same numbers on every machine.
function next_random() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
BEGIN {
    if (format == "csv") print "number,street,unit,city,postal_code,lat,lng"
    # Landmarks: real addresses and where they stand.
    emit("290", "Bremner Blvd", "", "Toronto", "M5V 3L9", 43.6426, -79.3871)
    emit("100", "King St W", "", "Toronto", "M5X 1A9", 43.6487, -79.3817)
    emit("1", "Blue Jays Way", "", "Toronto", "M5V 1J1", 43.6414, -79.3894)
    emit("40", "Bay St", "", "Toronto", "M5J 2X2", 43.6435, -79.3791)
    emit("100", "Queen St W", "", "Toronto", "M5H 2N2", 43.6534, -79.3841)
    emit("55", "Mill St", "", "Toronto", "M5A 3C4", 43.6503, -79.3596)
    emit("317", "Dundas St W", "", "Toronto", "M5T 1G4", 43.6536, -79.3925)
    emit("100", "Queens Park", "", "Toronto", "M5S 2C6", 43.6677, -79.3948)
    emit("1", "Austin Terr", "", "Toronto", "M5R 1X8", 43.6780, -79.4094)
    emit("93", "Front St E", "", "Toronto", "M5E 1C3", 43.6487, -79.3715)
    emit("65", "Front St W", "", "Toronto", "M5J 1E6", 43.6453, -79.3806)
    emit("2000", "Meadowvale Rd", "", "Toronto", "M1B 5K7", 43.8177, -79.1859)
    split("Maple Oak Elm Cedar Birch Pine Willow Spruce Ash Poplar Chestnut Walnut Hickory Linden Juniper Laurel Magnolia Alder Hawthorn Sumac", names, " ")
    split("St Ave Rd Blvd Dr Cres Ct Pl Ln Way", types, " ")
    seed = 20261123
}
NR > 1 && index($2, prefix) == 1 { code[++n] = $2; lat[n] = $3; lng[n] = $4; city[n] = $5 }
END {
    if (n == 0 || count == 0) exit
    per = int((count + n - 1) / n)
    written = 0
    for (i = 1; i <= n && written < count; i++) {
        for (j = 0; j < per && written < count; j++) {
            # 200 streets (20 names x 10 types) a code, numbers counting up along each.
            street = names[j % 20 + 1] " " types[int(j / 20) % 10 + 1]
            number = 1 + 2 * int(j / 200)
            dlat = (next_random() * 2 - 1) * 0.012
            dlng = (next_random() * 2 - 1) * 0.016
            # Clamped: the dataset has a ZIP at the South Pole (96598).
            plat = lat[i] + dlat; plat = plat < -90 ? -90 : (plat > 90 ? 90 : plat)
            plng = lng[i] + dlng; plng = plng < -180 ? -180 : (plng > 180 ? 180 : plng)
            emit(number, street, "", city[i], code[i], plat, plng)
            written++
        }
    }
}
' "$dataset"
