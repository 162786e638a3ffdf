//! Reading VRPTW instances: VRPLIB (the DIMACS/PyVRP files) and Solomon's text table, told
//! apart by their first words. A malformed file is a [`ParseError`] naming the line, never a panic.

use std::collections::HashMap;
use std::fmt;

use super::instance::{Format, Instance, Node, Tenths};

/// What is wrong with an instance file, and on which line (1-based; the last line + 1 when
/// something is missing at the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseError {}

type Parsed<T> = Result<T, ParseError>;

fn err<T>(line: usize, reason: impl Into<String>) -> Parsed<T> {
    Err(ParseError { line, reason: reason.into() })
}

/// The largest magnitude a coordinate or time may have: far beyond any instance, and small
/// enough that sums of tenths cannot overflow.
const LIMIT: f64 = 1e9;

/// Reads an instance in either format.
pub fn parse(text: &str) -> Parsed<Instance> {
    if text.trim().is_empty() {
        return err(1, "the file is empty");
    }
    let vrplib = text.lines().any(|l| {
        let l = l.trim_start().to_ascii_uppercase();
        l.starts_with("NODE_COORD_SECTION") || l.starts_with("DIMENSION")
    });
    if vrplib {
        return parse_vrplib(text);
    }
    if text.lines().any(|l| l.trim().eq_ignore_ascii_case("VEHICLE")) {
        return parse_solomon(text);
    }
    err(1, "expected a VRPLIB instance (DIMENSION, NODE_COORD_SECTION) or a Solomon one (VEHICLE, CUSTOMER)")
}

fn number(line: usize, token: &str, what: &str) -> Parsed<f64> {
    match token.parse::<f64>() {
        Ok(v) if v.is_finite() && v.abs() <= LIMIT => Ok(v),
        _ => err(line, format!("expected {what} (a number), found {token:?}")),
    }
}

fn integer(line: usize, token: &str, what: &str) -> Parsed<i64> {
    match token.parse::<i64>() {
        Ok(v) if v.unsigned_abs() <= LIMIT as u64 => Ok(v),
        _ => err(line, format!("expected {what} (an integer), found {token:?}")),
    }
}

fn tenths(line: usize, token: &str, what: &str) -> Parsed<Tenths> {
    let v = number(line, token, what)?;
    if v < 0.0 {
        return err(line, format!("{what} must not be negative, found {token}"));
    }
    Ok((v * 10.0).round() as Tenths)
}

fn count(line: usize, token: &str, what: &str) -> Parsed<usize> {
    match integer(line, token, what)? {
        v if v >= 1 => Ok(v as usize),
        _ => err(line, format!("{what} must be at least 1, found {token}")),
    }
}

/// Checks a window read from `line`.
fn window(line: usize, ready: Tenths, due: Tenths) -> Parsed<()> {
    if ready > due {
        return err(line, "the time window closes before it opens");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// VRPLIB
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Section {
    Header,
    Coords,
    Demands,
    Windows,
    Services,
    Depots,
    End,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Self::Header | Self::End => "",
            Self::Coords => "NODE_COORD_SECTION",
            Self::Demands => "DEMAND_SECTION",
            Self::Windows => "TIME_WINDOW_SECTION",
            Self::Services => "SERVICE_TIME_SECTION",
            Self::Depots => "DEPOT_SECTION",
        }
    }

    /// The numbers a row holds after the node number.
    fn width(self) -> usize {
        match self {
            Self::Coords | Self::Windows => 2,
            Self::Demands | Self::Services => 1,
            Self::Header | Self::Depots | Self::End => 0,
        }
    }
}

/// One section's rows by node number, and the line each came from.
#[derive(Default)]
struct Rows {
    header_line: usize,
    rows: HashMap<usize, (usize, Vec<String>)>,
}

#[derive(Default)]
struct Vrplib {
    name: Option<String>,
    dimension: Option<usize>,
    vehicles: Option<usize>,
    capacity: Option<i64>,
    service: Option<Tenths>,
    sections: HashMap<&'static str, Rows>,
    depots: Vec<(usize, usize)>,
}

fn parse_vrplib(text: &str) -> Parsed<Instance> {
    let mut file = Vrplib::default();
    let mut section = Section::Header;
    let mut last = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        last = line;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        let numeric = tokens[0].parse::<f64>().is_ok();
        if numeric && section != Section::Header && section != Section::End {
            data_row(&mut file, section, line, &tokens)?;
            continue;
        }
        if section == Section::End {
            return err(line, "expected nothing after EOF");
        }
        section = keyword(&mut file, line, trimmed)?;
        if section != Section::Header && section != Section::End {
            let rows = file.sections.entry(section.name()).or_default();
            if rows.header_line != 0 {
                return err(line, format!("{} appears twice", section.name()));
            }
            rows.header_line = line;
        }
    }
    finish_vrplib(file, last + 1)
}

/// A header entry (`KEY : VALUE`) or a section name; returns the section that follows.
fn keyword(file: &mut Vrplib, line: usize, trimmed: &str) -> Parsed<Section> {
    let (key, value) = match trimmed.split_once(':') {
        Some((k, v)) => (k.trim().to_ascii_uppercase(), Some(v.trim())),
        None => (trimmed.split_whitespace().next().unwrap_or("").to_ascii_uppercase(), None),
    };
    let section = match key.as_str() {
        "NODE_COORD_SECTION" => Section::Coords,
        "DEMAND_SECTION" => Section::Demands,
        "TIME_WINDOW_SECTION" => Section::Windows,
        "SERVICE_TIME_SECTION" => Section::Services,
        "DEPOT_SECTION" => Section::Depots,
        "EOF" => Section::End,
        _ => Section::Header,
    };
    if section != Section::Header {
        return Ok(section);
    }
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return err(line, format!("expected KEY : VALUE or a section name, found {trimmed:?}"));
    };
    let first = value.split_whitespace().next().unwrap_or(value);
    match key.as_str() {
        "NAME" => file.name = Some(value.to_string()),
        "DIMENSION" => file.dimension = Some(count(line, first, "DIMENSION")?),
        "VEHICLES" => file.vehicles = Some(count(line, first, "VEHICLES")?),
        "CAPACITY" => {
            let c = integer(line, first, "CAPACITY")?;
            if c < 0 {
                return err(line, "CAPACITY must not be negative");
            }
            file.capacity = Some(c);
        }
        "SERVICE_TIME" => file.service = Some(tenths(line, first, "SERVICE_TIME")?),
        "EDGE_WEIGHT_TYPE" if !value.eq_ignore_ascii_case("EUC_2D") => {
            return err(line, format!("expected EDGE_WEIGHT_TYPE : EUC_2D, found {value:?}"));
        }
        "TYPE" if !value.to_ascii_uppercase().contains("VRP") => {
            return err(line, format!("expected a VRP TYPE (VRPTW, CVRPTW), found {value:?}"));
        }
        // Informational entries (COMMENT, TYPE, EDGE_WEIGHT_TYPE once accepted) and keys of
        // other problem variants that do not change a VRPTW reading.
        _ => {}
    }
    Ok(Section::Header)
}

fn data_row(file: &mut Vrplib, section: Section, line: usize, tokens: &[&str]) -> Parsed<()> {
    if section == Section::Depots {
        let id = integer(line, tokens[0], "a depot node number or -1")?;
        if id != -1 {
            let id = usize::try_from(id).ok().filter(|&i| i >= 1);
            let Some(id) = id else { return err(line, "expected a depot node number of at least 1, or -1") };
            file.depots.push((id, line));
        }
        return Ok(());
    }
    let width = section.width();
    if tokens.len() != width + 1 {
        return err(
            line,
            format!(
                "expected a node number and {width} value(s) in {}, found {} item(s)",
                section.name(),
                tokens.len()
            ),
        );
    }
    let id = count(line, tokens[0], "a node number")?;
    let rows = file.sections.entry(section.name()).or_default();
    if rows.rows.insert(id, (line, tokens[1..].iter().map(|t| (*t).to_string()).collect())).is_some() {
        return err(line, format!("node {id} appears twice in {}", section.name()));
    }
    Ok(())
}

fn finish_vrplib(mut file: Vrplib, end: usize) -> Parsed<Instance> {
    let Some(dimension) = file.dimension else { return err(end, "expected DIMENSION in the header") };
    let Some(capacity) = file.capacity else { return err(end, "expected CAPACITY in the header") };
    for rows in file.sections.values() {
        if let Some((&id, &(line, _))) = rows.rows.iter().filter(|(id, _)| **id > dimension).min_by_key(|(_, r)| r.0) {
            return err(line, format!("node {id} is beyond DIMENSION {dimension}"));
        }
    }
    let required = [Section::Coords, Section::Demands, Section::Windows];
    for s in required {
        let Some(rows) = file.sections.get(s.name()) else { return err(end, format!("expected {}", s.name())) };
        if let Some(missing) = (1..=dimension).find(|i| !rows.rows.contains_key(i)) {
            return err(rows.header_line, format!("{} has no row for node {missing}", s.name()));
        }
    }
    let services = file.sections.remove(Section::Services.name());
    if let Some(rows) = &services
        && let Some(missing) = (1..=dimension).find(|i| !rows.rows.contains_key(i))
    {
        return err(rows.header_line, format!("SERVICE_TIME_SECTION has no row for node {missing}"));
    }
    let depot = match file.depots.as_slice() {
        [] => return err(end, "expected DEPOT_SECTION with one depot"),
        [(id, line)] if *id > dimension => return err(*line, format!("depot {id} is beyond DIMENSION {dimension}")),
        [(id, _)] => *id,
        [_, (_, line), ..] => return err(*line, "only one depot is supported"),
    };
    let row = |s: Section, id: usize| &file.sections[s.name()].rows[&id];
    let mut nodes = Vec::with_capacity(dimension);
    for id in 1..=dimension {
        let (cl, c) = row(Section::Coords, id);
        let (dl, d) = row(Section::Demands, id);
        let (wl, w) = row(Section::Windows, id);
        let demand = integer(*dl, &d[0], "a demand")?;
        if demand < 0 {
            return err(*dl, "a demand must not be negative");
        }
        let (ready, due) = (tenths(*wl, &w[0], "a window start")?, tenths(*wl, &w[1], "a window end")?);
        window(*wl, ready, due)?;
        let service = match &services {
            Some(rows) => {
                let (sl, s) = &rows.rows[&id];
                tenths(*sl, &s[0], "a service time")?
            }
            None => file.service.unwrap_or(0),
        };
        let x = number(*cl, &c[0], "an x coordinate")?;
        let y = number(*cl, &c[1], "a y coordinate")?;
        let node = Node { id: id as u32, x, y, demand, ready, due, service: if id == depot { 0 } else { service } };
        nodes.push(node);
    }
    nodes.swap(0, depot - 1);
    // Keep the customers in file order after moving the depot to the front.
    nodes[1..].sort_by_key(|n| n.id);
    let vehicles = file.vehicles.unwrap_or(dimension.saturating_sub(1).max(1));
    let name = file.name.unwrap_or_default();
    Ok(Instance::new(name, Format::Vrplib, vehicles, capacity, nodes))
}

// ---------------------------------------------------------------------------------------
// Solomon
// ---------------------------------------------------------------------------------------

fn parse_solomon(text: &str) -> Parsed<Instance> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
    let end = text.lines().count() + 1;
    let mut next = |what: &str| lines.next().ok_or(ParseError { line: end, reason: format!("expected {what}") });
    let (_, name) = next("the instance name")?;
    let name = name.to_string();
    let (line, vehicle) = next("VEHICLE")?;
    if !vehicle.eq_ignore_ascii_case("VEHICLE") {
        return err(line, format!("expected VEHICLE, found {vehicle:?}"));
    }
    let (line, header) = next("NUMBER CAPACITY")?;
    if !header.to_ascii_uppercase().starts_with("NUMBER") {
        return err(line, format!("expected NUMBER CAPACITY, found {header:?}"));
    }
    let (line, fleet) = next("the vehicle number and capacity")?;
    let fleet: Vec<&str> = fleet.split_whitespace().collect();
    if fleet.len() != 2 {
        return err(line, "expected the vehicle number and the capacity");
    }
    let vehicles = count(line, fleet[0], "the vehicle number")?;
    let capacity = integer(line, fleet[1], "the capacity")?;
    if capacity < 0 {
        return err(line, "the capacity must not be negative");
    }
    let (line, customer) = next("CUSTOMER")?;
    if !customer.eq_ignore_ascii_case("CUSTOMER") {
        return err(line, format!("expected CUSTOMER, found {customer:?}"));
    }
    let (line, header) = next("the CUST NO. header")?;
    if !header.to_ascii_uppercase().starts_with("CUST") {
        return err(line, format!("expected the CUST NO. XCOORD. … header, found {header:?}"));
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut seen = HashMap::new();
    for (line, row) in lines {
        let t: Vec<&str> = row.split_whitespace().collect();
        if t.len() != 7 {
            return err(
                line,
                format!("expected 7 columns (number, x, y, demand, ready, due, service), found {}", t.len()),
            );
        }
        let id = integer(line, t[0], "a customer number")?;
        let Ok(id) = u32::try_from(id) else { return err(line, "a customer number must not be negative") };
        if let Some(first) = seen.insert(id, line) {
            return err(line, format!("customer {id} already appears on line {first}"));
        }
        let demand = integer(line, t[3], "a demand")?;
        if demand < 0 {
            return err(line, "a demand must not be negative");
        }
        let (ready, due) = (tenths(line, t[4], "a ready time")?, tenths(line, t[5], "a due date")?);
        window(line, ready, due)?;
        let service = tenths(line, t[6], "a service time")?;
        let (x, y) = (number(line, t[1], "an x coordinate")?, number(line, t[2], "a y coordinate")?);
        nodes.push(Node { id, x, y, demand, ready, due, service });
    }
    if nodes.is_empty() {
        return err(end, "expected the depot's row (customer 0) after the header");
    }
    nodes[0].service = 0;
    Ok(Instance::new(name, Format::Solomon, vehicles, capacity, nodes))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const VRPLIB: &str = "NAME : tiny
TYPE : VRPTW
DIMENSION : 3
VEHICLES : 2
CAPACITY : 50
SERVICE_TIME : 10
EDGE_WEIGHT_TYPE : EUC_2D
NODE_COORD_SECTION
1 0 0
2 3 4
3 -1.5 2
DEMAND_SECTION
1 0
2 10
3 20
TIME_WINDOW_SECTION
1 0 1000
2 5 60.5
3 0 100
DEPOT_SECTION
1
-1
EOF
";

    const SOLOMON: &str = "TINY

VEHICLE
NUMBER     CAPACITY
  2         50

CUSTOMER
CUST NO.  XCOORD.   YCOORD.    DEMAND   READY TIME  DUE DATE   SERVICE   TIME

    0      0          0          0          0       1000          0
    1      3          4         10          5         60         10
    2     -1          2         20          0        100         10
";

    fn fails(text: &str) -> ParseError {
        parse(text).expect_err("a malformed file")
    }

    #[test]
    fn a_vrplib_file_is_read_in_tenths_with_the_depot_first() {
        let i = parse(VRPLIB).unwrap();
        assert_eq!((i.name.as_str(), i.format, i.vehicles, i.capacity), ("tiny", Format::Vrplib, 2, 50));
        assert_eq!(i.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!((i.nodes[0].service, i.nodes[1].service), (0, 100));
        assert_eq!((i.nodes[1].ready, i.nodes[1].due, i.nodes[2].demand), (50, 605, 20));
        assert_eq!(i.travel(0, 1), 50);
    }

    #[test]
    fn the_depot_need_not_be_node_one_and_service_times_may_be_a_section() {
        let text = VRPLIB
            .replace("DEPOT_SECTION\n1\n", "DEPOT_SECTION\n2\n")
            .replace("DEPOT_SECTION", "SERVICE_TIME_SECTION\n1 0\n2 0\n3 7\nDEPOT_SECTION");
        let i = parse(&text).unwrap();
        assert_eq!(i.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [2, 1, 3]);
        assert_eq!(i.nodes[2].service, 70);
    }

    #[test]
    fn a_solomon_file_is_read_with_customer_zero_as_the_depot() {
        let i = parse(SOLOMON).unwrap();
        assert_eq!((i.name.as_str(), i.format, i.vehicles, i.capacity), ("TINY", Format::Solomon, 2, 50));
        assert_eq!(i.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!((i.nodes[1].ready, i.nodes[1].due, i.nodes[1].service), (50, 600, 100));
    }

    #[test]
    fn malformed_vrplib_files_name_the_line_and_what_was_expected() {
        let cases = [
            (VRPLIB.replace("DIMENSION : 3\n", ""), 23, "expected DIMENSION"),
            (VRPLIB.replace("2 3 4", "2 3 x"), 10, "expected a y coordinate (a number), found \"x\""),
            (VRPLIB.replace("2 3 4", "2 3"), 10, "expected a node number and 2 value(s) in NODE_COORD_SECTION"),
            (VRPLIB.replace("3 20", "2 20"), 15, "node 2 appears twice in DEMAND_SECTION"),
            (VRPLIB.replace("3 0 100", "3 100 0"), 19, "the time window closes before it opens"),
            (VRPLIB.replace("3 0 100\n", ""), 16, "TIME_WINDOW_SECTION has no row for node 3"),
            (VRPLIB.replace("EUC_2D", "EXPLICIT"), 7, "expected EDGE_WEIGHT_TYPE : EUC_2D"),
            (VRPLIB.replace("1\n-1", "1\n2\n-1"), 22, "only one depot is supported"),
            (VRPLIB.replace("3 -1.5 2", "4 -1.5 2"), 11, "node 4 is beyond DIMENSION 3"),
            (format!("{VRPLIB}1 2 3\n"), 24, "expected nothing after EOF"),
            (VRPLIB.replace("VEHICLES : 2", "VEHICLES : 0"), 4, "VEHICLES must be at least 1"),
            (VRPLIB.replace("CAPACITY : 50", "CAPACITY"), 5, "expected KEY : VALUE or a section name"),
        ];
        for (text, line, reason) in cases {
            let e = fails(&text);
            assert_eq!(e.line, line, "{e:?}");
            assert!(e.reason.starts_with(reason), "{e:?} does not start with {reason:?}");
        }
    }

    #[test]
    fn malformed_solomon_files_name_the_line_and_what_was_expected() {
        let cases = [
            (SOLOMON.replace("  2         50", "  2"), 5, "expected the vehicle number and the capacity"),
            (SOLOMON.replace("CUSTOMER\n", "CUSTOMERS\n"), 7, "expected CUSTOMER"),
            (SOLOMON.replace("     10          5  ", "     10  "), 11, "expected 7 columns"),
            (SOLOMON.replace("    2     -1", "    1     -1"), 12, "customer 1 already appears on line 11"),
            (SOLOMON.replace(" 10          5 ", " -10         5 "), 11, "a demand must not be negative"),
            (SOLOMON.lines().take(8).collect::<Vec<_>>().join("\n"), 9, "expected the depot's row"),
            (String::new(), 1, "the file is empty"),
            ("hello\nworld\n".into(), 1, "expected a VRPLIB instance"),
        ];
        for (text, line, reason) in cases {
            let e = fails(&text);
            assert_eq!(e.line, line, "{e:?}");
            assert!(e.reason.starts_with(reason), "{e:?} does not start with {reason:?}");
        }
    }

    proptest! {
        #[test]
        fn garbage_is_an_error_never_a_panic(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        #[test]
        fn a_damaged_file_is_an_error_on_a_line_of_the_file_never_a_panic(
            vrplib in any::<bool>(),
            line in 0_usize..30,
            junk in "[-0-9 .:a-zA-Z_]{0,20}",
        ) {
            let base = if vrplib { VRPLIB } else { SOLOMON };
            let mut lines: Vec<&str> = base.lines().collect();
            let at = line.min(lines.len() - 1);
            lines[at] = &junk;
            let text = lines.join("\n");
            if let Err(e) = parse(&text) {
                prop_assert!(e.line >= 1 && e.line <= lines.len() + 1, "{e:?}");
            }
        }
    }
}
